"""GELU, the tanh approximation (makemore's NewGELU)."""

from derive import Op

OP = Op(
    name="gelu_tanh",
    doc="0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3))), element-wise on any shape.",
    inputs=["x[...]"],
    definitions=[
        "out[...] = 0.5 * x[...] * (1 + tanh(sqrt(2 / pi) * (x[...] + 0.044715 * x[...]**3)))"
    ],
)
