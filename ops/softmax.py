"""Softmax over the last dimension, the row maximum subtracted for range (as the seed does)."""

from derive import Op

OP = Op(
    name="softmax",
    doc="exp(x - max) / sum(exp(x - max)) over the last dimension of x[..., C].",
    inputs=["x[..., C]"],
    definitions=[
        "maxes[...] = Max(x[..., c], c)",
        "counts[..., c] = exp(x[..., c] - maxes[...])",
        "counts_sum[...] = Sum(counts[..., c], c)",
        "out[..., c] = counts[..., c] / counts_sum[...]",
    ],
)
