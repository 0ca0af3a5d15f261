"""``log(-log(sigmoid(x)))`` step by step: a stepwise adjoint's ``1 - sigmoid(x)`` is
``sigmoid(-x)`` too (0 past x = 37 where the gradient is -1; probing, twenty-third session)."""

from derive import Op

OP = Op(
    name="stepwise_log_of_a_log_sigmoid",
    inputs=["x[N]", "y[N]"],
    definitions=["a[n] = log(sigmoid(x[n]))", "b[n] = -a[n]", "out[n] = log(b[n]) * y[n]"],
    stepwise=True,
)
