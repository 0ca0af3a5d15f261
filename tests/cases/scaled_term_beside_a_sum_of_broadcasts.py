"""As scaled_term_beside_a_broadcast.py, with the other terms a sum: the addcmul fusion's
written-out form wraps them in parentheses, and the group was built without its axes, so
aligning it did nothing: ``Z * c[:, None] + (s[:, None] + t)`` read s over z (a shape error
where I != Z, silently wrong where I == Z; fuzz 940482 wrote such a sum through the width
split)."""

from derive import Op

OP = Op(
    name="scaled_term_beside_a_sum_of_broadcasts",
    doc="hid[i, z, q] = Z c[z] + s[i] + t[q].",
    inputs=["c[Z]", "s[I]", "t[Q]"],
    ranges={"y": "Z"},
    definitions=["hid[i, z, q] = c[z] * Sum(1, y) + s[i] + t[q]"],
)
