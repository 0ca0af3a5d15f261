"""A 1-d convolution, F.conv1d's cross-correlation with zero padding (issue 25): x read at
stride*t + dilation*k - padding, 0 outside. The backward is derived (dx a conv_transpose1d of
grad_out with w, dw a conv1d of x with grad_out: derive/lower/windows.py recognises both)."""

from derive import Op

OP = Op(
    name="conv1d",
    doc="F.conv1d(x, w, b, stride, padding, dilation): a 1-d convolution with zero padding.",
    inputs=["x[N, C, T]", "w[O, C, K]", "b[O]"],
    params={"stride": 1, "padding": 0, "dilation": 1},
    sizes={"L": "(T + 2*padding - dilation*(K - 1) - 1) // stride + 1"},
    ranges={"t": "L"},
    definitions=[
        "out[n, o, t] = Sum(x[n, c, stride*t + dilation*k - padding] * w[o, c, k], c, k) + b[o]"
    ],
)
