"""A ratio of two sums of exps, each near overflow where the ratio is modest (fuzz --range
930115): the tangent's quotient-rule term S1 T / S2**2 formed S1 T first (inf) where
S1 / S2 * T / S2 is finite. Products with denominators alternate their divisions and
multiplications (arithmetic._interleaved)."""

from derive import Op

OP = Op(
    name="ratio_of_exp_sums",
    doc="out[d] = Sum(exp(a[i, d]), i) / Sum(exp(w[d, g]), g).",
    inputs=["a[I, D]", "w[D, G]"],
    definitions=["out[d] = Sum(exp(a[i, d]), i) / Sum(exp(w[d, g]), g)"],
)
