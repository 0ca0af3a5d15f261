"""Log-sum-exp over the last dimension, the maximum subtracted for range."""

from derive import Op

OP = Op(
    name="logsumexp",
    doc="log(sum(exp(x))) over the last dimension of x[..., C], stable for inputs of +-1e4.",
    inputs=["x[..., C]"],
    definitions=[
        "maxes[...] = Max(x[..., c], c)",
        "counts_sum[...] = Sum(exp(x[..., c] - maxes[...]), c)",
        "out[...] = maxes[...] + log(counts_sum[...])",
    ],
)
