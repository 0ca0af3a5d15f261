"""Inputs named as the lowering names its temporaries (``t_W`` for a grouped factor of W,
``sum_x`` for a sum over x): a temporary must never take an input's name (fuzz 500015, whose
tangent input ``t_W`` was overwritten by the factor ``W**2 + 2``)."""

from derive import Op

OP = Op(
    name="inputs_named_like_temporaries",
    inputs=["x[H, Y]", "W[U, H]", "t_W[U]", "sum_x[H]"],
    definitions=[
        "h[g, y] = Sum((W[g, f]**2 + 2) * exp(x[f, y]), f) * t_W[g]",
        "out[g, y] = h[g, y] + Sum(x[f, y] * sum_x[f], f) + Sum(x[f, y], f)",
    ],
)
