"""Smooth L1 with its threshold a param, as torch writes it (found by probing, 2026-11-25): at
beta = 0 the loss is L1 (torch's ``smooth_l1_loss(beta=0)``), but the quotient d**2 / (2 beta)
the where() drops was a python ZeroDivisionError; so was the explicit guard's (``where(beta >
0, ..., |d|)``), and ``math.log(alpha)`` of a guarded param at 0. A param's division, power
and math function take torch's inf and nan (derive/ir/scalars.py)."""

from derive import Op

OP = Op(
    name="smooth_l1",
    inputs=["x[N, M]", "t[N, M]"],
    params={"beta": 1.0},
    definitions=[
        "d[n, m] = x[n, m] - t[n, m]",
        "l[n, m] = where(abs(d[n, m]) < beta, d[n, m]**2 / (2 * beta), abs(d[n, m]) - beta / 2)",
        "loss = Sum(l[n, m], n, m) / (N * M)",
    ],
)
