"""fuzz case, seed 26"""

# Found by `python -m fuzz` (case seed 26) on 912c005, shrunk from 1 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(n1,
# out_argmax))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz26",
    doc="fuzz case, seed 26",
    inputs=[
        "g[N, R, N]",
    ],
    definitions=[
        "out = Max(Sum(g[x, kk, s], kk, x), s)",
    ],
)

SEED = 26
