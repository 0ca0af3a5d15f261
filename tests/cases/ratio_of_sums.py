"""Fuzz seed 10324: a definition that is a sum divided by a sum. Folding a sum back into it must
read the divisor at the same indices (the divisor kept the definition's own index names)."""

from derive import Op

OP = Op(
    name="ratio_of_sums",
    inputs=["W1[R, R, R]"],
    definitions=[
        "res[r, w] = Sum(W1[j, w, r], j) / Sum(5 * exp(W1[r, d, w]), d)",
        "Wq = Max(Sum(sigmoid(res[f, s]), s), f)",
    ],
)
