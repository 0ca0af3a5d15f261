"""fuzz case, seed 6500045 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 6500045) on 572e46c: refused, "emitted code is
# not valid Python" (an align of an aligned value printed `x[]`). Shrunk on that engine with `x[]`
# read as no broadcast: WRONG (exception RuntimeError: The size of tensor a (2) must match the
# size of tensor b (3) at non-singleton dimension 0). An aligned value's rank counted only its
# kept flags, not its own axes (value.align, orders.rank).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz6500045",
    doc="fuzz case, seed 6500045 (--windows)",
    inputs=[
        "prob[R, R, R]",
        "hid[R, R]",
        "z[N, R, Z, Z, R]",
        "labels[R, Z]: int64",
        "tgt[D]: int64",
        "cls[R, N]: int64",
    ],
    definitions=[
        "logits[h, d, u] = Sum(z[h, mm, d, ij, u], ij, mm)",
        "W1[v, a, kk] = Sum(logits[kk, a + 1, j]*z[c - 1, 3*j + v + 4, a, t2, j - 2], c, j, t2)",
        "conv[r, t, aa] = Sum(W1[p + 2*r, t, aa]*Sum(z[p, tgt[w], -D + w + 1, t - 2, tgt[p + 2*r]], w), p)",
    ],
    sizes={"U": "(D - N) // 2 + 1"},
    ranges={"c": "N", "j": "R", "r": "U", "t": "Z", "v": "D"},
)

SEED = 6500045
