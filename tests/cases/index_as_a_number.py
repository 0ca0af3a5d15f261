"""An index read as a number, not a subscript: ALiBi's distance penalty, slope * (i - j), in
causal attention (the mask written on the weights, where(j <= i, exp(s - m), 0)). The
lowering once refused it ("'i' has no value"); it is the arange over the index's range, in
the op's dtype."""

from derive import Op

OP = Op(
    name="alibi",
    inputs=["q[T, D]", "k[T, D]", "v[T, D]"],
    params={"slope": 0.5},
    definitions=[
        "s[i, j] = Sum(q[i, d] * k[j, d], d) / sqrt(D) - slope * (i - j)",
        "m[i] = Max(where(j <= i, s[i, j], -inf), j)",
        "e[i, j] = where(j <= i, exp(s[i, j] - m[i]), 0)",
        "out[i, d] = Sum(e[i, j] * v[j, d], j) / Sum(e[i, j], j)",
    ],
)
