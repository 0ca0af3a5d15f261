"""A 2-d average pool (issue 25): the mean of a K x K window every `stride`, zero-padded by
`padding` (counted in the mean, as F.avg_pool2d's count_include_pad)."""

from derive import Op

OP = Op(
    name="avg_pool2d",
    doc="F.avg_pool2d(x, kernel, stride, padding).",
    inputs=["x[N, C, H, W]"],
    params={"kernel": 3, "stride": 2, "padding": 1},
    sizes={
        "K": "kernel",
        "HO": "(H + 2*padding - kernel) // stride + 1",
        "WO": "(W + 2*padding - kernel) // stride + 1",
    },
    ranges={"p": "K", "q": "K", "i": "HO", "j": "WO"},
    definitions=[
        "out[n, c, i, j] = Sum(x[n, c, stride*i + p - padding, stride*j + q - padding], p, q)"
        " / (K*K)"
    ],
)
