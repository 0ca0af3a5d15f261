"""Sums the text groups, side by side and scaled: ``(a - b) + (c - d)`` was printed ``a - b +
c - d`` (python adds left to right), and ``3 (a - b)`` was ``3 a - 3 b``; ``a - b + eps`` in a
log's argument was added in SymPy's order in the tangent (probing the written sums,
twenty-third session)."""

from derive import Op

OP = Op(
    name="grouped_sums",
    inputs=["a[N]", "b[N]", "c[N]", "d[N]"],
    params={"eps": 1e-6},
    definitions=[
        "pairs[n] = (a[n] - b[n]) + (c[n] - d[n])",
        "scaled[n] = 3 * (a[n] - b[n]) + c[n]",
        "out[n] = pairs[n] * scaled[n] + log(a[n] - b[n] + eps + 1)",
    ],
)
