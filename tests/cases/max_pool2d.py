"""A 2-d max pool (issue 25): the Max of a K x K window every `stride`, zero padding never read
(padding 0); the adjoint routes grad_out to each window's argmax."""

from derive import Op

OP = Op(
    name="max_pool2d",
    doc="F.max_pool2d(x, kernel, stride).",
    inputs=["x[N, C, H, W]"],
    params={"kernel": 2, "stride": 2},
    sizes={"K": "kernel", "HO": "(H - kernel) // stride + 1", "WO": "(W - kernel) // stride + 1"},
    ranges={"p": "K", "q": "K", "i": "HO", "j": "WO"},
    definitions=["out[n, c, i, j] = Max(x[n, c, stride*i + p, stride*j + q], p, q)"],
)
