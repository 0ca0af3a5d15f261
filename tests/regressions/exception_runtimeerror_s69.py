"""fuzz case, seed 69"""

# Found by `python -m fuzz` (case seed 69) on 912c005, shrunk from 2 definition(s).
# Failed: WRONG (exception RuntimeError: permute(): duplicate dims are not allowed.)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz69",
    doc="fuzz case, seed 69",
    inputs=[
        "a1[V, F]",
        "z[F, F, V]",
        "pos[V, F]: int64",
    ],
    definitions=[
        "w[f, v] = a1[v, f]*Sum(exp(a1[n, f])*exp(z[pos[t, f], f, t]), t, n)",
    ],
)

SEED = 69
