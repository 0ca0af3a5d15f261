"""An average pool (issue 25): a window of `kernel` entries every `stride`, zero-padded by
`padding` (counted in the mean, as F.avg_pool1d's count_include_pad); no tensor has the window's
axis or the pooled one, so both ranges are declared."""

from derive import Op

OP = Op(
    name="avg_pool1d",
    doc="F.avg_pool1d(x, kernel, stride, padding).",
    inputs=["x[N, C, T]"],
    params={"kernel": 3, "stride": 2, "padding": 1},
    sizes={"K": "kernel", "L": "(T + 2*padding - kernel) // stride + 1"},
    ranges={"k": "K", "t": "L"},
    definitions=["out[n, c, t] = Sum(x[n, c, stride*t + k - padding], k) / K"],
)
