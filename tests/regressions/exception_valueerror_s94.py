"""fuzz case, seed 94"""

# Found by `python -m fuzz` (case seed 94) on d8f7643, shrunk from 2 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(Zz_argmax,
# y))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz94",
    doc="fuzz case, seed 94",
    inputs=[
        "z[Y]",
    ],
    definitions=[
        "Zz = Max(z[w], w)",
    ],
)

SEED = 94
