"""fuzz case, seed 1179 (--affine)"""

# Found by `python -m fuzz` (case seed 1179) on e9f8cf7, shrunk from 3 definition(s).
# Failed: WRONG (second order value: d2/dy off by 1.46 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1179",
    doc="fuzz case, seed 1179 (--affine)",
    inputs=[
        "Zz[D, D, D]",
        "y[V, D]",
        "cls[H]: int64",
    ],
    definitions=[
        "C[v, ij] = Sum(Zz[v + bb, ij, r] * y[bb, r], bb, r)",
        "emb[n1, s, c] = C[cls[c], n1*step - 1] + y[s, n1]",
    ],
    params={"step": 2},
    sizes={"G": "D - V + 1"},
    ranges={"bb": "V", "v": "G"},
)

SEED = 1179
