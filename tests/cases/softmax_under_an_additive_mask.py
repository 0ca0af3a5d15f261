"""A softmax-weighted sum under BERT's additive mask, ``x + (1 - keep) * -10000.0``."""

from derive import Op

OP = Op(
    name="softmax_under_an_additive_mask",
    doc="Sum_c softmax(x + (1 - keep) * -10000.0)[n, c] w[n, c] (probing, twenty-second session).",
    inputs=["x[N, C]", "keep[N, C]", "w[N, C]"],
    definitions=[
        "s[n, c] = x[n, c] + (1 - keep[n, c]) * -10000.0",
        "m[n] = Max(s[n, c], c)",
        "out[n] = Sum(exp(s[n, c] - m[n]) * w[n, c], c) / Sum(exp(s[n, c2] - m[n]), c2)",
    ],
)
