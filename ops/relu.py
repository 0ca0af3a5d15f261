"""Element-wise ReLU; its derivative is the step 1[x > 0] (0 at exactly 0, as torch's)."""

from derive import Op

OP = Op(
    name="relu",
    doc="Element-wise max(x, 0) over a tensor of any shape.",
    inputs=["x[...]"],
    definitions=["out[...] = relu(x[...])"],
)
