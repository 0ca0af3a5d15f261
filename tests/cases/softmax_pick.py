"""Issue 9 item 3: the max-subtraction adjoint must cancel (it was refused)."""

from derive import Op

OP = Op(
    name="softmax_pick",
    inputs=["logits[N, C]", "t[N]: int64"],
    definitions=[
        "maxes[n] = Max(logits[n, c], c)",
        "norm[n, c] = logits[n, c] - maxes[n]",
        "counts[n, c] = exp(norm[n, c])",
        "s[n] = Sum(counts[n, c], c)",
        "probs[n, c] = counts[n, c] / s[n]",
        "out[n] = probs[n, t[n]]",
    ],
)
