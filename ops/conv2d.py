"""A 2-d convolution, F.conv2d's cross-correlation with zero padding (issue 25), the same
stride, padding and dilation along both axes; no groups. The backward is derived (dx a
conv_transpose2d of grad_out with w, dw a conv2d of x with grad_out: derive/lower/windows.py
recognises both)."""

from derive import Op

OP = Op(
    name="conv2d",
    doc="F.conv2d(x, w, b, stride, padding, dilation): a 2-d convolution with zero padding.",
    inputs=["x[N, C, H, W]", "w[O, C, KH, KW]", "b[O]"],
    params={"stride": 1, "padding": 0, "dilation": 1},
    sizes={
        "HO": "(H + 2*padding - dilation*(KH - 1) - 1) // stride + 1",
        "WO": "(W + 2*padding - dilation*(KW - 1) - 1) // stride + 1",
    },
    ranges={"i": "HO", "j": "WO"},
    definitions=[
        "out[n, o, i, j] = Sum(x[n, c, stride*i + dilation*p - padding,"
        " stride*j + dilation*q - padding] * w[o, c, p, q], c, p, q) + b[o]"
    ],
)
