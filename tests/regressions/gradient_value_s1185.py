"""fuzz case, seed 1185"""

# Found by `python -m fuzz` (case seed 1185) on 53cb757, shrunk from 2 definition(s).
# Failed: WRONG (gradient value: dhid off by 0.676 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1185",
    doc="fuzz case, seed 1185",
    inputs=[
        "hid[Y, Y, Y]",
    ],
    definitions=[
        "tmp[n, s] = Sum(hid[n, x, ij] + hid[s, x, ij], x, ij)",
    ],
)

SEED = 1185
