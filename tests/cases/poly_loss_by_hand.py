"""Poly-1 loss over soft labels: cross-entropy plus eps * (1 - p), p = e / Sum(e) inline. Each
term of the sum reads log(p) or p beside q; the 1/p of the log's derivative cancels only once
the product with p's own derivative is multiplied out (simplify.cancel_exps)."""

from derive import Op

OP = Op(
    name="poly_loss_by_hand",
    doc="sum q (-log softmax(x) + 2 (1 - softmax(x))) / N.",
    inputs=["x[N, C]", "q[N, C]"],
    definitions=[
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "p[n, c] = e[n, c] / Sum(e[n, c2], c2)",
        "loss = Sum(q[n, c] * (2 * (1 - p[n, c]) - log(p[n, c])), n, c) / N",
    ],
)
