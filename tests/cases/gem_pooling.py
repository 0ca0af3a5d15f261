"""Generalised-mean pooling, ``(mean_l relu(x)**p)**(1/p)``, p a learnable 0-d input (found by
probing, 2026-11-25): d x**p/dp = x**p log x was 0 * -inf = NaN wherever x is 0, after a relu
the common case, so p's gradient was NaN (torch: finite, its pow backward sets the term to 0
where the base is 0 and the exponent positive)."""

from derive import Op

OP = Op(
    name="gem_pooling",
    inputs=["x[N, C, L]", "p"],
    definitions=["out[n, c] = (Sum(relu(x[n, c, l])**p, l) / L)**(1 / p)"],
)
