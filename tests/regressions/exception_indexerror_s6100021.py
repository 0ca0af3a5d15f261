"""fuzz case, seed 6100021 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 6100021) on 4569df9, shrunk from 5 definition(s).
# Failed: WRONG (exception IndexError: too many indices for tensor of dimension 2 (in the
# generated module, line 779))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz6100021",
    doc="fuzz case, seed 6100021 (--windows)",
    inputs=[
        "b2[N, H, N]",
        "y[P, K, I, R]",
        "pos[P]: int64",
        "cls[K, R]: int64",
        "emb[2, R, K]",
    ],
    definitions=[
        "u = view(b2, N, P, I, N)",
        "C[q, kk, ij, g] = Sum(u[3*q + groups*m, kk, j, g] * y[kk, ij, j, m], j, m)",
        "a1[v, f, n1] = C[cls[v, f], n1 + off, -v + K - 1, pos[n1]] * emb[0, f, v]",
        "act[a, t2, c] = Sum(a1[a - b, t2, c], b) / N",
    ],
    params={"groups": 2, "off": 1},
    sizes={"P": "groups", "I": "H / groups", "G": "(N - groups*(R - 1) - 1) // 3 + 1"},
    ranges={"a": "K", "b": "N", "q": "G"},
)

SEED = 6100021
