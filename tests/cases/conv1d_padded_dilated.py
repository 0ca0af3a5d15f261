"""A 1-d convolution with zero padding P and dilation 2 (issue 25): an affine read
x[n, c, t + 2*k - P], zero outside x, over an output axis declared as L."""

from derive import Op

OP = Op(
    name="conv1d_padded_dilated",
    doc="F.conv1d(x, w, b, padding=P, dilation=2).",
    inputs=["x[N, C, T]", "w[O, C, K]", "b[O]"],
    params={"P": 1},
    sizes={"L": "T + 2*P - 2*(K - 1)"},
    ranges={"t": "L"},
    definitions=["out[n, o, t] = Sum(x[n, c, t + 2*k - P] * w[o, c, k], c, k) + b[o]"],
)
