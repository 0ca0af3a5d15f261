"""A log-cosh regression loss, written as its formula. cosh overflows at |d| > 710 in float64
(89 in float32), where the loss is |d| - log 2 and finite: the forward was inf. The range
row ``log(cosh(x)) -> |x| + softplus(-2|x|) - log 2`` (derive/identities.py) rewrites it
(found by probing); the gradient, tanh, is derived from the written form."""

from derive import Op

OP = Op(
    name="log_cosh_loss",
    doc="The mean log-cosh of the residuals.",
    inputs=["yhat[N, M]", "y[N, M]"],
    definitions=["loss = Sum(log(cosh(yhat[n, m] - y[n, m])), n, m) / (N * M)"],
)
