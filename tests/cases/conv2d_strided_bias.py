"""A 2-d convolution with bias, stride and padding (issue 25): F.conv2d(x, w, b, stride=S,
padding=P); the bias is a per-output-channel term beside the window sum."""

from derive import Op

OP = Op(
    name="conv2d_strided_bias",
    doc="F.conv2d(x, w, b, stride=S, padding=P).",
    inputs=["x[N, C, H, W]", "w[O, C, KH, KW]", "b[O]"],
    params={"S": 2, "P": 1},
    sizes={"HO": "(H + 2*P - KH) // S + 1", "WO": "(W + 2*P - KW) // S + 1"},
    ranges={"i": "HO", "j": "WO"},
    definitions=[
        "out[n, o, i, j] = Sum(x[n, c, S*i + p - P, S*j + q - P] * w[o, c, p, q], c, p, q) + b[o]"
    ],
)
