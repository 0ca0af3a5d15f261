"""fuzz case, seed 174 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 174) on 0997ee3, shrunk from 2 definition(s).
# Failed: WRONG (exception IndexError: index 4 is out of bounds for dimension 0 with size 4 (in
# the generated module, line 162))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz174",
    doc="fuzz case, seed 174 (--affine)",
    inputs=[
        "logits[Y, Y]",
        "cls[V, V]: int64",
        "X[L]: int64",
        "ids[L]: int64",
    ],
    definitions=[
        "g[h] = Sum(logits[cls[h, l], cls[l, h]], l)",
        "emb = Max(where(logits[X[2*v], X[v]] < 0, g[ids[v]], 0), v)",
    ],
)

SEED = 174
