"""Cross-entropy as people write it by hand: probabilities over an inline sum, the picked one's
log. The definition with the sum in its denominator is inlined like an element-wise one
(canon._over_sums), so log(p) splits in the forward and 1/p cancels against e in the backward
(simplify._delta_substituted): the catalogue's (p - onehot) / N, finite at logits of +-1e4."""

from derive import Op

OP = Op(
    name="cross_entropy_by_hand",
    doc="-mean log softmax(x)[n, y[n]], the denominator written inline.",
    inputs=["x[N, C]", "y[N]: int64"],
    definitions=[
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "p[n, c] = e[n, c] / Sum(e[n, c2], c2)",
        "loss = -Sum(log(p[n, y[n]]), n) / N",
    ],
)
