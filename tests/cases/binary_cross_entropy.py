"""A sigmoid and a label: dz collapses to g (s - y) / N, as softmax + cross-entropy does."""

from derive import Op

OP = Op(
    name="binary_cross_entropy",
    inputs=["z[N]", "y[N]"],
    definitions=[
        "s[n] = 1/(1 + exp(-z[n]))",
        "loss = -Sum(y[n]*log(s[n]) + (1 - y[n])*log(1 - s[n]), n)/N",
    ],
)
