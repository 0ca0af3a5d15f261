"""fuzz case, seed 277"""

# Found by `python -m fuzz` (case seed 277) on 912c005, shrunk from 3 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(t,
# tmp_argmax)*Sum(prob[pos[f], q], (f, 0, F - 1)))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz277",
    doc="fuzz case, seed 277",
    inputs=[
        "prob[A, Q]",
        "u[Q, T, Q]",
        "pos[F]: int64",
    ],
    definitions=[
        "loss[r, mm] = Sum(u[r, mm, p], p)",
        "tmp = Max(Sum(loss[f, bb] * prob[pos[w], f], w, f), bb)",
    ],
    stepwise=True,
)

SEED = 277
