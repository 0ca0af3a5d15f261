"""Focal loss as people write it: -(1 - p[y])**2 log p[y], p = e / Sum(e). log p differentiates
to 1/p = S exp(m - x[y]) (inf where p[y] underflows) in one term of a sum that the rest of the
product, (onehot - p) p[y], cancels once multiplied out (simplify.cancel_exps); kept apart the
backward was 0 * inf = nan at logits of +-1e4 where the forward is finite."""

from derive import Op

OP = Op(
    name="focal_loss_by_hand",
    doc="-mean (1 - softmax(x)[n, y[n]])**2 log softmax(x)[n, y[n]].",
    inputs=["x[N, C]", "y[N]: int64"],
    definitions=[
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "p[n, c] = e[n, c] / Sum(e[n, c2], c2)",
        "loss = -Sum((1 - p[n, y[n]])**2 * log(p[n, y[n]]), n) / N",
    ],
)
