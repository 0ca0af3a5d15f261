"""fuzz case, seed 11601677"""

# Found by `python -m fuzz` (case seed 11601677) on 587bb65, shrunk from 2 definition(s).
# Failed: WRONG (exception TypeError: unsupported operand type(s) for +=: 'int' and 'NoneType' (at
# ir/triangles.py:107))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz11601677",
    doc="fuzz case, seed 11601677",
    inputs=[
        "a1[G, G, G]",
        "b2[G, G]",
        "Y[G]: int64",
    ],
    definitions=[
        "u[j] = b2[j, Y[j]]",
        "emb[p, s] = Sum(where(e + u[w] < cosh(u[p]), where(w < s, a1[p, s, w], 0), u[s] * a1[s, w, p]), w)",
    ],
)

SEED = 11601677
