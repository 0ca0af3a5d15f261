"""An average pool that counts only the entries inside x (F.avg_pool1d's
count_include_pad=False): the divisor ``cnt[t]`` reads no tensor, a constant of the indices
that the definitions reading it take in."""

from derive import Op

OP = Op(
    name="avg_pool1d_excluding_padding",
    doc="F.avg_pool1d(x, kernel, stride, padding, count_include_pad=False).",
    inputs=["x[N, C, T]"],
    params={"kernel": 3, "stride": 2, "padding": 1},
    sizes={"K": "kernel", "L": "(T + 2*padding - kernel) // stride + 1"},
    ranges={"k": "K", "t": "L"},
    definitions=[
        "cnt[t] = Sum(where(stride*t + k - padding >= 0,"
        " where(stride*t + k - padding <= T - 1, 1, 0), 0), k)",
        "out[n, c, t] = Sum(x[n, c, stride*t + k - padding], k) / cnt[t]",
    ],
)
