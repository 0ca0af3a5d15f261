"""Heads split by a derived size (D = C / k) and merged by a contraction over (h, d)."""

from derive import Op

OP = Op(
    name="heads",
    doc="Per head, a sum of squares over d scaled by 1/sqrt(D), merged back through W.",
    inputs=["x[N, C]", "W[C, M]"],
    params={"k": 2},
    sizes={"H": "k", "D": "C / k"},
    definitions=[
        "xh = view(x, N, H, D)",
        "Wh = view(W, H, D, M)",
        "s[n, h] = Sum(xh[n, h, d]**2, d) / sqrt(D)",
        "out[n, m] = Sum(tanh(s[n, h]) * xh[n, h, d] * Wh[h, d, m], h, d)",
    ],
)
