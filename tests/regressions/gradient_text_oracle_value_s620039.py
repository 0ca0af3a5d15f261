"""fuzz case, seed 620039"""

# Found by `python -m fuzz` (case seed 620039) on e086b8c, shrunk from 4 definition(s).
# Failed: WRONG (gradient (text oracle) value: da1 off by inf (relative))
# The engine was right (its da1 matched autograd on the parse: 0); the text oracle, reading
# s / (N * exp(W)) literally with exp(W) = inf, gave NaN. Such a draw is now ill-conditioned.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz620039",
    doc="fuzz case, seed 620039",
    inputs=[
        "u[A, P]",
        "Kx[A]",
        "ids[N]: int64",
        "idx[N, P]: int64",
        "Y[P]: int64",
        "a1[A, P, P, A, P, P]",
        "s[P, P]",
    ],
    definitions=[
        "W[h, z, v] = Sum(Sum((3) * exp(a1[v, t2, o, j, z, h]), o)**(3/2), j, t2)",
        "b2[p] = Sum(s[h, p] / (N * exp(W[h, p, Y[p]])), h) / P",
    ],
)

SEED = 620039
