"""fuzz case, seed 12999 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 12999) on a3ae3ec, shrunk from 5 definition(s).
# Failed: WRONG (exception PolynomialError: non-commutative expressions are not supported (at
# symbolic/simplify.py:482))
# Fixed: sp.cancel sees each where() as one symbol (derive/symbolic/simplify.py, _cancelled).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12999",
    doc="fuzz case, seed 12999 (--windows)",
    inputs=[
        "v[G, G, G]",
        "logits[Q, Q]",
        "X[G]: int64",
        "idx[Q]: int64",
        "pos[G, Q]: int64",
    ],
    definitions=[
        "z[i, r] = v[X[i], r, i]",
        "tmp[m, q, aa] = 1/((z[G - m - 1, q] + z[m, q])**2 + 1/2)",
    ],
    params={"lam": 3},
    sizes={"I": "lam", "J": "Q / lam"},
    ranges={"aa": "Q", "m": "G"},
)

SEED = 12999
