"""fuzz case, seed 90 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 90) on 0997ee3, shrunk from 3 definition(s).
# Failed: WRONG (gradient value: dact off by 0.457 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz90",
    doc="fuzz case, seed 90 (--affine)",
    inputs=[
        "act[M]",
        "Y[L]: int64",
    ],
    definitions=[
        "W1 = Max(act[Y[m - 1]], m)",
    ],
    ranges={"m": "L"},
)

SEED = 90
