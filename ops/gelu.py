"""GELU, the exact erf form (F.gelu's default)."""

from derive import Op

OP = Op(
    name="gelu",
    doc="0.5 x (1 + erf(x / sqrt(2))), element-wise on any shape.",
    inputs=["x[...]"],
    definitions=["out[...] = 0.5 * x[...] * (1 + erf(x[...] / sqrt(2)))"],
)
