"""fuzz case, seed 121"""

# Found by `python -m fuzz` (case seed 121) on 912c005, shrunk from 1 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term KroneckerDelta(r,
# a1_argmax[a])*KroneckerDelta(u, tgt[a])*grad_out[a])
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz121",
    doc="fuzz case, seed 121",
    inputs=[
        "hid[U, R, A]",
        "tgt[A]: int64",
    ],
    definitions=[
        "a1[mm] = Max(hid[tgt[mm], t2, mm], t2)",
    ],
)

SEED = 121
