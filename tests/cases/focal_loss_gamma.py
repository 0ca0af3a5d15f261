"""Focal loss with its focusing exponent a param (found by probing, 2026-11-25): d(1 - p)**gamma
is gamma (1 - p)**gamma / (1 - p) as SymPy writes it, the divisor as p - 1 or e_y - S beside
(1 - e_y / S)**gamma, so a confident prediction (p rounding to 1: logits [20, 0, 0] in
float32) made dx 0 / 0 = nan where torch's is 0. The power and its divisor are merged
(derive/lower/arithmetic.py, powers_over_their_base): gamma (1 - p)**(gamma - 1)."""

from derive import Op

OP = Op(
    name="focal_loss_gamma",
    inputs=["x[N, C]", "y[N]: int64"],
    params={"gamma": 2.0, "alpha": 0.25},
    definitions=[
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "p[n, c] = e[n, c] / Sum(e[n, c2], c2)",
        "loss = -alpha * Sum((1 - p[n, y[n]])**gamma * log(p[n, y[n]]), n) / N",
    ],
)
