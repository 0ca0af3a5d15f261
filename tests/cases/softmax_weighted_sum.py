"""Attention's softmax written as one quotient, ``Sum(e v) / Sum(e)`` over a causal mask: the
max's adjoint is 0 as in the catalogue's named-probs form, derived by interchanging the sums
(sum_u e sum_d g v = sum_d g sum_u e v, the numerator of out) and by cancelling sums equal up to
the names of their indices; no argmax is saved and no scatter runs."""

from derive import Op

OP = Op(
    name="softmax_weighted_sum",
    doc="sum_u softmax_u(where(u <= t, s, -inf)) v[u, d], written as one quotient.",
    inputs=["s[B, T, T]", "v[B, T, D]"],
    definitions=[
        "masked[b, t, u] = where(u <= t, s[b, t, u], -inf)",
        "m[b, t] = Max(masked[b, t, u], u)",
        "e[b, t, u] = exp(masked[b, t, u] - m[b, t])",
        "out[b, t, d] = Sum(e[b, t, u] * v[b, u, d], u) / Sum(e[b, t, u2], u2)",
    ],
)
