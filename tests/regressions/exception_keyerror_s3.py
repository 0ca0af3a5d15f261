"""fuzz case, seed 3"""

# Found by `python -m fuzz` (case seed 3) on 912c005, shrunk from 3 definition(s).
# Failed: WRONG (exception KeyError: cosh)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz3",
    doc="fuzz case, seed 3",
    inputs=[
        "W[N]",
        "u[L, L]",
    ],
    definitions=[
        "C[o, t, m] = Sum(cosh(3)*u[n, o], n)*Sum(W[h]*W[t] + u[o, m], h)",
    ],
)

SEED = 3
