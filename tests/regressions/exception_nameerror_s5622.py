"""fuzz case, seed 5622"""

# Found by `python -m fuzz` (case seed 5622) on b3cd8c9, shrunk from 4 definition(s).
# Failed: WRONG (exception NameError: name 'sigmoid' is not defined (in the generated module, line
# 115))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz5622",
    doc="fuzz case, seed 5622",
    inputs=[
        "z[P, N, P]",
        "gain[V, P]",
        "cls[P]: int64",
        "W[U, N, P]",
        "act[P, U, P, P]",
        "emb[U, N]",
        "tgt[N]: int64",
        "Y[N]: int64",
        "Zz[P, N]",
    ],
    definitions=[
        "g[aa, b, y] = W[b, aa, y]/sigmoid(V)",
    ],
)

SEED = 5622
