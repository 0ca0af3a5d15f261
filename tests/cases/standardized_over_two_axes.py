"""Instance normalisation written out over the last two axes of x[N, C, H, W], with an affine
per channel: a mean and a variance over two trailing axes, each saved squeezed of both (a
rule that computed it with ``torch.native_layer_norm`` was tried and taken out again, see
docs/benchmarks.md)."""

from derive import Op

OP = Op(
    name="standardized_over_two_axes",
    doc="Each (n, c) plane of x standardized over its H x W entries, then scaled per channel.",
    inputs=["x[N, C, H, W]", "g[C]", "b[C]"],
    params={"eps": 1e-5},
    definitions=[
        "mu[n, c] = Sum(x[n, c, h, w], h, w) / (H * W)",
        "d[n, c, h, w] = x[n, c, h, w] - mu[n, c]",
        "var[n, c] = Sum(d[n, c, h, w]**2, h, w) / (H * W)",
        "r[n, c] = (var[n, c] + eps)**(-1/2)",
        "xhat[n, c, h, w] = d[n, c, h, w] * r[n, c]",
        "out[n, c, h, w] = g[c] * xhat[n, c, h, w] + b[c]",
    ],
)
