"""A Max inside an expression and a Max over two indices: lifted into definitions of their own."""

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
