"""fuzz case, seed 170002"""

# Found by `python -m fuzz` (case seed 170002) on 279ef55, shrunk from 3 definition(s).
# Failed: WRONG (exception NameError: name 'a1' is not defined (in the generated module, line
# 133))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz170002",
    doc="fuzz case, seed 170002",
    inputs=[
        "prob[K]",
        "C[U, U, K]",
        "h[A, A]",
        "X[K]: int64",
        "ids[K, K]: int64",
        "cls[I]: int64",
    ],
    definitions=[
        "a1[u, mm] = Max(C[cls[u], ids[mm, i], i], i)",
        "emb[s, x] = h[X[s], x]",
    ],
    params={"lam": 1.25, "tau": 2},
    sizes={"Z": "tau", "Y": "A / tau"},
)

SEED = 170002
