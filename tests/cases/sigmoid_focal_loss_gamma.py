"""A sigmoid focal loss as torchvision writes it, its focusing exponent a param (found by
probing, 2026-11-25): d(1 - pt)**gamma is gamma (1 - pt)**gamma / (pt - 1) as SymPy writes
it, 0 / 0 where pt rounds to 1 (x = 20 with t = 1 in float32, x = -800 with t = 0). A
reciprocal whose base is (the negation of) another factor's is merged into that power
(simplify._merged_powers): -gamma (1 - pt)**(gamma - 1)."""

from derive import Op

OP = Op(
    name="sigmoid_focal_loss_gamma",
    inputs=["x[N]", "t[N]"],
    params={"gamma": 2.0, "alpha": 0.25},
    definitions=[
        "p[n] = sigmoid(x[n])",
        "ce[n] = softplus(x[n]) - t[n] * x[n]",
        "pt[n] = p[n] * t[n] + (1 - p[n]) * (1 - t[n])",
        "at[n] = alpha * t[n] + (1 - alpha) * (1 - t[n])",
        "loss = Sum(at[n] * ce[n] * (1 - pt[n])**gamma, n) / N",
    ],
)
