"""fuzz case, seed 2104 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 2104) on c239c15, shrunk from 4 definition(s).
# Failed: WRONG (timeout: no result within 30 s of CPU)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz2104",
    doc="fuzz case, seed 2104 (--affine)",
    inputs=[
        "W1[K, K, Y]",
        "X[Y, K]: int64",
        "Zz[K]",
    ],
    definitions=[
        "prob[i, q, u] = W1[u, i, q - u - 1]",
        "s[o, bb, g] = prob[X[o + 1, bb], o - stride*bb, g]",
        "hid[y, f, r] = Sum(where(n > y, W1[n, f, r] * (s[r, f - 1, 2*r - 1] * (Zz[y] * s[r, f, y])), 0), n)",
    ],
    params={"stride": 2},
    ranges={"bb": "K", "o": "Y", "q": "Y"},
)

SEED = 2104
