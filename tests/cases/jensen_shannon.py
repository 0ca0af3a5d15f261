"""A Jensen-Shannon divergence between two max-shifted softmaxes, its mixture a definition of
its own, as a user writes it from the formula. Where both probabilities underflow (logits of
+-800 in float64, +-120 in float32) ``log(mid)`` was -inf and ``p (log p - log mid)`` 0 * inf:
NaN loss and gradients (found by probing). The log of the two exp terms is a logaddexp
(``A + softplus(B - A)``, derive/identities.py), and the backward's ``p / (p + r q)``, which
differentiating that log divides by, is a sigmoid of the same logs."""

from derive import Op

OP = Op(
    name="jensen_shannon",
    doc="JS(softmax(a), softmax(b)) per row, averaged.",
    inputs=["a[N, C]", "b[N, C]"],
    definitions=[
        "ma[n] = Max(a[n, c], c)",
        "mb[n] = Max(b[n, c], c)",
        "p[n, c] = exp(a[n, c] - ma[n]) / Sum(exp(a[n, k] - ma[n]), k)",
        "q[n, c] = exp(b[n, c] - mb[n]) / Sum(exp(b[n, k] - mb[n]), k)",
        "mid[n, c] = (p[n, c] + q[n, c]) / 2",
        "loss = Sum(p[n, c] * (log(p[n, c]) - log(mid[n, c]))"
        " + q[n, c] * (log(q[n, c]) - log(mid[n, c])), n, c) / (2 * N)",
    ],
)
