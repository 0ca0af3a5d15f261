"""fuzz case, seed 16310 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 16310) on 860702f, shrunk from 7 definition(s).
# Failed: WRONG (gradient value: dW1 off by inf (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz16310",
    doc="fuzz case, seed 16310 (--windows)",
    inputs=[
        "prob[K]",
        "W1[K, K, D]",
    ],
    definitions=[
        "w[j, d, kk] = where(d <= kk, Sum(sigmoid(prob[a]) + W1[j, d, kk], a), -inf)",
        "s[j, kk] = Max(w[j, d, kk], d)",
        "Zz[bb, y, n] = prob[y]*s[n, bb]/Sum(w[f, k, bb]**2, k, f)",
    ],
)

SEED = 16310
