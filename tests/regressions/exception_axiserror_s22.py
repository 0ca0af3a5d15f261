"""fuzz case, seed 22"""

# Found by `python -m fuzz` (case seed 22) on a2620e6, shrunk from 1 definition(s).
# Failed: WRONG (exception AxisError: a value over [] cannot take the axes ['k'])
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz22",
    doc="fuzz case, seed 22",
    inputs=[
        "z[F, R]",
        "pos[R]: int64",
    ],
    definitions=[
        "x = Sum(z[pos[k], k] + z[pos[k], k], k)",
    ],
)

SEED = 22
