"""Issue 9 item 5: Mish, x tanh(log(1 + exp(x))): finite and exact at +-800."""

from derive import Op

OP = Op(
    name="mish", inputs=["x[...]"], definitions=["out[...] = x[...]*tanh(log(1 + exp(x[...])))"]
)
