"""A log of a log-sigmoid: its derivative ``(1 - s) / softplus(-x)`` divides one vanishing
quantity by another, so ``1 - s``, which keeps no relative accuracy where s is near 1, was
0.1% off at x = 30 and 0 (for -1) past 37; it is computed as ``sigmoid(-x)``
(``identities.sigmoid_complements``; probing, twenty-third session)."""

from derive import Op

OP = Op(
    name="log_of_a_log_sigmoid",
    inputs=["x[N]"],
    definitions=["y[n] = log(-log(sigmoid(x[n])))", "loss = Sum(y[n], n)"],
)
