"""Issue 9 item 5: the log-sigmoid loss written naturally; dz must collapse to g (s - 1) / N."""

from derive import Op

OP = Op(
    name="log_sigmoid_loss",
    inputs=["z[N]"],
    definitions=["s[n] = 1/(1 + exp(-z[n]))", "loss = -Sum(log(s[n]), n)/N"],
)
