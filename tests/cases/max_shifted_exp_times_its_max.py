"""A max-shifted exp summed and scaled by its max: the backward's ``g m exp(p) exp(W - m)``
multiplies the exp (at most 1, 0 where it underflows) before the large ``exp(p)``."""

from derive import Op

OP = Op(
    name="max_shifted_exp_times_its_max",
    doc="m Sum_s exp(W - m), W = x exp(p), m = max_s W (fuzz --range --powers 1044206, shrunk).",
    inputs=["x[S]", "p[S, U]"],
    definitions=[
        "W[s, u] = x[s] * exp(p[s, u])",
        "m[u] = Max(W[s, u], s)",
        "out[u] = m[u] * Sum(exp(W[s, u] - m[u]), s)",
    ],
)
