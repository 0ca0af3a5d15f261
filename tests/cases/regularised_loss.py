"""A loss of two scalar terms: cross-entropy plus an L2 penalty on a weight, each a 0-d
definition the last one adds; the temperature is a 0-d input."""

from derive import Op

OP = Op(
    name="regularised_loss",
    inputs=["logits[N, C]", "targets[N]: int64", "W[C, D]", "temperature"],
    definitions=[
        "maxes[n] = Max(logits[n, c] / temperature, c)",
        "lse[n] = maxes[n] + log(Sum(exp(logits[n, c] / temperature - maxes[n]), c))",
        "ce = Sum(lse[n] - logits[n, targets[n]] / temperature, n) / N",
        "l2 = Sum(W[c, d]**2, c, d)",
        "loss = ce + 0.01 * l2",
    ],
)
