"""fuzz case, seed 389"""

# Found by `python -m fuzz` (case seed 389) on 912c005, shrunk from 1 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(x_argmax,
# z))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz389",
    doc="fuzz case, seed 389",
    inputs=[
        "emb[Z]",
    ],
    definitions=[
        "x = Max(emb[r], r)",
    ],
)

SEED = 389
