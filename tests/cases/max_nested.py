"""A Max inside an expression (lifted into a definition of its own) and a Max over two indices
(kept whole, its argmax one int: c*D + v, its radix the range of v)."""

from derive import Op

OP = Op(
    name="max_nested",
    inputs=["x[N, C]", "y[N, C, D]"],
    definitions=[
        "h[n] = exp(Max(x[n, c], c)) + Sum(x[n, c], c)",
        "m[n] = Max(y[n, c, v], c, v)",
        "out[n] = h[n] * m[n]",
    ],
)
