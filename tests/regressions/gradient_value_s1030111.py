"""fuzz case, seed 1030111"""

# Found by `python -m fuzz` (case seed 1030111) on 08b0014, shrunk from 4 definition(s).
# Failed: WRONG (gradient value: dx off by 0.324 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1030111",
    doc="fuzz case, seed 1030111",
    inputs=[
        "x[B, Y, P, G]",
        "X[B]: int64",
        "ids[P]: int64",
    ],
    definitions=[
        "a1[i, y, n1] = softplus(Sum(x[kk, n1, y, i], kk))",
        "b2 = Sum(a1[ids[t2], t2, X[s]], t2, s)",
    ],
)

SEED = 1030111
