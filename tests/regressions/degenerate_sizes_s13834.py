"""fuzz case, seed 13834 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 13834) on c87cc4e: the harness itself failed
# (RuntimeError: negative dimension -25) drawing idx[R] at a degenerate draw,
# R = (K - U) // stride + 1.
# Fixed: fuzz/check.py draw_inputs gives such an input an empty dimension; the forward must
# then refuse the sizes with one ValueError naming the op.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz13834",
    doc="fuzz case, seed 13834 (--windows)",
    inputs=[
        "z[A, Q]",
        "g[K, K, Q]",
        "x[K, U]",
        "W[U, T, U]",
        "cls[U, R]: int64",
        "idx[R]: int64",
    ],
    definitions=[
        "s = view(x, K, J, B)",
        "grouped = view(x, K, Y, T)",
        "u = view(W, Y, P, T, U)",
        "Zz[i, h, p] = Sum(grouped[stride*i + kk, h, bb] * u[h, p, bb, kk] * s[stride*i + kk, idx[i], cls[kk, i]], bb, kk)",
    ],
    params={"alpha": 3, "groups": 3, "stride": 3},
    sizes={
        "J": "alpha",
        "B": "U / alpha",
        "Y": "groups",
        "T": "U / groups",
        "R": "(K - U) // stride + 1",
        "P": "U / groups",
    },
    ranges={"kk": "U"},
    stepwise=True,
)

SEED = 13834
