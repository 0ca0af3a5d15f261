"""Element-wise logistic sigmoid; the derived backward reads the saved output (s * (1 - s))."""

from derive import Op

OP = Op(
    name="sigmoid",
    doc="Element-wise 1 / (1 + exp(-x)) over a tensor of any shape.",
    inputs=["x[...]"],
    definitions=["out[...] = sigmoid(x[...])"],
)
