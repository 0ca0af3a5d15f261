"""Group norm as users write it: the input viewed as groups of C * L / groups entries, each
normalised, viewed back (F.group_norm without its affine). The checker drew sizes for a derived
size whose numerator is a product only where that product was a size of its own: here C * L
was never made divisible by groups, and `derive check` stopped ("K = C*L/groups is 25/2")."""

from derive import Op

OP = Op(
    name="group_norm_by_view",
    doc="F.group_norm(x, groups, eps=eps) for x[N, C, L].",
    inputs=["x[N, C, L]"],
    params={"groups": 2, "eps": 1e-5},
    sizes={"G": "groups", "K": "C * L / groups"},
    definitions=[
        "xg = view(x, N, G, K)",
        "mu[n, g] = Sum(xg[n, g, k], k) / K",
        "var[n, g] = Sum((xg[n, g, k] - mu[n, g])**2, k) / K",
        "yg[n, g, k] = (xg[n, g, k] - mu[n, g]) / sqrt(var[n, g] + eps)",
        "out = view(yg, N, C, L)",
    ],
)
