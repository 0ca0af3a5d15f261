"""A 2-d average pool, F.avg_pool2d(x, kernel_size, stride, padding) with its defaults
count_include_pad=True and ceil_mode=False (issue 25): the mean of each kernel_size x
kernel_size window, the zero padding counted,

    out[n, c, i, j] = sum_{p, q} x[n, c, S i + p - P, S j + q - P] / K^2,

read outside x as 0. The backward is derived: grad_out / K^2 spread back over each window (a
transposed convolution with a kernel of ones)."""

from derive import Op

OP = Op(
    name="avg_pool2d",
    doc="F.avg_pool2d(x, kernel_size, stride, padding): the mean of each window, zero-padded.",
    inputs=["x[N, C, H, W]"],
    params={"kernel_size": 2, "stride": "kernel_size", "padding": 0},
    sizes={
        "K": "kernel_size",
        "HO": "(H + 2*padding - kernel_size) // stride + 1",
        "WO": "(W + 2*padding - kernel_size) // stride + 1",
    },
    ranges={"p": "K", "q": "K", "i": "HO", "j": "WO"},
    definitions=[
        "out[n, c, i, j] = Sum(x[n, c, stride*i + p - padding, stride*j + q - padding], p, q)"
        " / (K*K)"
    ],
)
