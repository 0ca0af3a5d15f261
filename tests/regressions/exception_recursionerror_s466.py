"""fuzz case, seed 466"""

# Found by `python -m fuzz` (case seed 466) on a2620e6, shrunk from 3 definition(s).
# Failed: WRONG (exception RecursionError: maximum recursion depth exceeded in comparison)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz466",
    doc="fuzz case, seed 466",
    inputs=[
        "act[P, R]",
        "h[R, L]",
        "W[Q]",
        "idx[P]: int64",
        "w[L, L, P]",
    ],
    definitions=[
        "tmp[a] = Sum(h[p, a] * W[j], p, j)",
        "res[t2, i] = minimum(tmp[t2], tmp[t2]) + act[i, idx[i]]",
        "a1[i, kk, c] = exp(-w[kk, i, c])*res[i, c]*minimum(3.48168907033806, Abs(tmp[kk]))",
    ],
)

SEED = 466
