"""Log-softmax over the last dimension: x - max - log(sum(exp(x - max)))."""

from derive import Op

OP = Op(
    name="log_softmax",
    doc="x - logsumexp(x) over the last dimension of x[..., C], the maximum subtracted for range.",
    inputs=["x[..., C]"],
    definitions=[
        "maxes[...] = Max(x[..., c], c)",
        "counts_sum[...] = Sum(exp(x[..., c] - maxes[...]), c)",
        "out[..., c] = x[..., c] - maxes[...] - log(counts_sum[...])",
    ],
)
