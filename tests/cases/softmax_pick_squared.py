"""Issue 9 item 2: softmax steps, then a sum of squared picked probabilities."""

from derive import Op

OP = Op(
    name="softmax_pick_squared",
    inputs=["logits[N, C]", "t[N]: int64"],
    definitions=[
        "maxes[n] = Max(logits[n, c], c)",
        "norm[n, c] = logits[n, c] - maxes[n]",
        "counts[n, c] = exp(norm[n, c])",
        "s[n] = Sum(counts[n, c], c)",
        "probs[n, c] = counts[n, c] / s[n]",
        "loss = Sum(probs[n, t[n]]**2, n)",
    ],
)
