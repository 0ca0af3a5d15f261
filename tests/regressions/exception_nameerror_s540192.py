"""fuzz case, seed 540192"""

# Found by `python -m fuzz` (case seed 540192) on 4182cc4, shrunk from 3 definition(s).
# Failed: WRONG (exception NameError: name 'sqrt' is not defined (in the generated module, line
# 88))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz540192",
    doc="fuzz case, seed 540192",
    inputs=[
        "emb[F]",
        "y[N, R]",
    ],
    definitions=[
        "u[v, n, m] = emb[v] + y[n, m]",
        "act[j, l, z] = exp(-u[z, j, l])/(R + sqrt(2))",
    ],
)

SEED = 540192
