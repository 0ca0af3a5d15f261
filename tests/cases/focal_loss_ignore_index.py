"""A focal loss with torch's default ignore_index, the guard written as an equality
(``where(t[n] == -100, 0, ..)``: the second branch reads t). The picked probability's log
and power are calls on a guarded pick: lifted into definitions of their own to be saved
(derive/symbolic/saving.py), they read the ignored entries unguarded, and every call with a
-100 was refused; they stay under their where()."""

from derive import Op

OP = Op(
    name="focal_loss_ignore_index",
    doc="Sum over counted positions of -(1 - p)^2 log p, p = softmax(x)[n, t[n]]; t = -100 "
    "ignored.",
    inputs=["x[N, C]", "t[N]: int64"],
    definitions=[
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "p[n, c] = e[n, c] / Sum(e[n, c2], c2)",
        "loss = Sum(where(t[n] == -100, 0, -(1 - p[n, t[n]])**2 * log(p[n, t[n]])), n)",
    ],
)
