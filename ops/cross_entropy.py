"""Mean negative log-likelihood of softmax(logits), step by step as in the seed."""

from derive import Op

OP = Op(
    name="cross_entropy",
    doc="Mean cross-entropy of logits[N, C] against integer targets[N] (F.cross_entropy).",
    inputs=["logits[N, C]", "targets[N]: int64"],
    definitions=[
        "logit_maxes[n] = Max(logits[n, c], c)",
        "norm_logits[n, c] = logits[n, c] - logit_maxes[n]",
        "counts[n, c] = exp(norm_logits[n, c])",
        "counts_sum[n] = Sum(counts[n, c], c)",
        "counts_sum_inv[n] = counts_sum[n]**-1",
        "probs[n, c] = counts[n, c] * counts_sum_inv[n]",
        "logprobs[n, c] = log(probs[n, c])",
        "loss = -Sum(logprobs[n, targets[n]], n) / N",
    ],
)
