"""Cross-entropy written with an unshifted logsumexp, as a user writes it from the formula:
``log(Sum(exp(x[n, k]), k)) - x[n, y[n]]``. The parser shifts the sum by its maximum
(derive/language/logsumexp.py): inf and NaN at logits of 1e4 before, F.cross_entropy's
values now; the shift's adjoint collapses, so the backward is the softmax minus the one-hot."""

from derive import Op

OP = Op(
    name="cross_entropy_as_logsumexp",
    inputs=["x[N, C]", "y[N]: int64"],
    definitions=["loss = Sum(log(Sum(exp(x[n, k]), k)) - x[n, y[n]], n) / N"],
)
