"""The entropy of a softmax, -sum p log p, written the natural way: log(p) read through p's
canonical form is (x - m) - log(S) in the forward and in the backward (identities.split_logs),
finite where p rounds to 0 (logits of +-1e4), where log(p) itself is -inf and 0 * -inf NaN."""

from derive import Op

OP = Op(
    name="softmax_entropy",
    doc="-sum_c p log p with p = softmax(x) over c.",
    inputs=["x[N, C]"],
    definitions=[
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "S[n] = Sum(e[n, c], c)",
        "p[n, c] = e[n, c] / S[n]",
        "out[n] = -Sum(p[n, c] * log(p[n, c]), c)",
    ],
)
