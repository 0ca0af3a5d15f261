"""fuzz case, seed 192"""

# Found by `python -m fuzz` (case seed 192), shrunk from 4 definition(s).
# Failed: WRONG (exception IndexError: index 2 is out of bounds for dimension 2 with size 2)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz192",
    doc="fuzz case, seed 192",
    inputs=[
        "x[V]",
        "cls[L, V]: int64",
    ],
    definitions=[
        "tmp[m, h, j] = x[h] + x[cls[j, m]]",
        "loss[t2] = Sum(tmp[cls[t2, d], d, t2], d)",
    ],
)

SEED = 192
