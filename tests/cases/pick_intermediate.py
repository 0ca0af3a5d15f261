"""Issue 9 item 2: a pick from an intermediate; the backward line ended in (...)[]."""

from derive import Op

OP = Op(
    name="pick_intermediate",
    inputs=["z[N, C]", "t[N]: int64"],
    definitions=["e[n, c] = exp(z[n, c])", "out[n] = e[n, t[n]]"],
)
