"""fuzz case, seed 1216"""

# Found by `python -m fuzz --affine` (case seed 1216) on e9f8cf7, shrunk from 7 definition(s);
# the unused input gain, param tau and size H of the shrunk op removed by hand.
# Failed: WRONG (gradient value: dC off by inf (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1216",
    doc="fuzz case, seed 1216 (--affine)",
    inputs=[
        "C[T]",
        "w[T, T, D]",
    ],
    definitions=[
        "Wq[b, ij, n1] = where(ij <= b, C[b] / ((3) * exp(w[b, ij, n1])), -inf)",
        "z[b, n1] = Max(Wq[b, ij, n1], ij)",
        "h[b, ij, n1] = exp(Wq[b, ij, n1] - z[b, n1])",
        "loss[b, ij, n1] = h[b, ij, n1] / Sum(h[b, r, n1], r)",
        "g[k, i, a] = h[i, k, a] - loss[i, k, i - 2]",
    ],
)

SEED = 1216
