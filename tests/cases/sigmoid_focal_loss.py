"""A sigmoid focal loss written from its binary cross-entropy (found by probing, 2026-11-25):
dx is p (1 - p) (((1 - t) / (1 - p) - t / p) dce + (2 t - 1) dpt), whose first term cancels
to (p - t) dce only once the product is multiplied into it; kept apart it was 0 * inf = nan at
x = 20 (p rounds to 1 in float32) and at x = -800 (p = 0) where torch's gradient is 0. The
product is multiplied into the terms whose reciprocals it cancels (simplify.cancel_exps)."""

from derive import Op

OP = Op(
    name="sigmoid_focal_loss",
    inputs=["x[N]", "t[N]"],
    definitions=[
        "p[n] = sigmoid(x[n])",
        "ce[n] = -t[n] * log(p[n]) - (1 - t[n]) * log(1 - p[n])",
        "pt[n] = p[n] * t[n] + (1 - p[n]) * (1 - t[n])",
        "loss = Sum(ce[n] * (1 - pt[n])**2, n) / N",
    ],
)
