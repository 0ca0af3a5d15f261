"""A term that lowers to a python number times a tensor (u[o, m] * Sum(1, h) is N u[o, m])
beside a term over another axis: the addcmul fusion writes such a product out and adds the
rest, which it did without aligning it to the product's axes. W[t] S was added as W[m] S:
a shape error where N != L, a silently wrong sum where N == L (found by the lowering's
width split, which writes such terms)."""

from derive import Op

OP = Op(
    name="scaled_term_beside_a_broadcast",
    doc="C[o, t, m] = W[t] Sum(W) + N u[o, m].",
    inputs=["W[N]", "u[L, L]"],
    ranges={"h": "N"},
    definitions=["C[o, t, m] = W[t] * Sum(W[h], h) + u[o, m] * Sum(1, h)"],
)
