"""A causal softmax over an index comparison, and a sum masked by int data (issue 13's
where()): the mask factor is dropped beside the softmax, which is 0 off the mask already."""

from derive import Op

OP = Op(
    name="masked_softmax",
    doc="softmax(where(s <= t, x, -inf)) over s, weighted by rows whose label is not -1.",
    inputs=["x[N, T, T]", "w[N, T]", "label[N]: int64"],
    definitions=[
        "masked[n, t, s] = where(s <= t, x[n, t, s], -inf)",
        "maxes[n, t] = Max(masked[n, t, s], s)",
        "counts[n, t, s] = exp(masked[n, t, s] - maxes[n, t])",
        "probs[n, t, s] = counts[n, t, s] / Sum(counts[n, t, s2], s2)",
        "out[n, t] = where(label[n] >= 0, Sum(probs[n, t, s] * w[n, s], s), 0)",
    ],
)
