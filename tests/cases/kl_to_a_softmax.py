"""KL(q || softmax(x)) with the softmax's denominator inline and the log-softmax written in one
line beside it: both logs split through the inlined definitions (finite at +-1e4)."""

from derive import Op

OP = Op(
    name="kl_to_a_softmax",
    doc="sum q (log q - log softmax(x)) + sum log(exp(x - m) / Sum(exp(x - m))) / N.",
    inputs=["x[N, C]", "q[N, C]"],
    definitions=[
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "p[n, c] = e[n, c] / Sum(e[n, c2], c2)",
        "lp[n, c] = log(exp(x[n, c] - m[n]) / Sum(exp(x[n, c2] - m[n]), c2))",
        "out = Sum(q[n, c] * (log(q[n, c]) - log(p[n, c])), n, c) + Sum(lp[n, c], n, c) / N",
    ],
)
