"""Element-wise tanh; the derived backward reuses the saved output (1 - out**2)."""

from derive import Op

OP = Op(
    name="tanh",
    doc="Element-wise tanh over a tensor of any shape.",
    inputs=["x[...]"],
    definitions=["out[...] = tanh(x[...])"],
)
