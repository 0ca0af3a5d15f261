"""A 2-d max pool, F.max_pool2d(x, kernel_size, stride) without padding (issue 25): the
largest entry of each kernel_size x kernel_size window, windows every ``stride`` entries,

    out[n, c, i, j] = max_{p, q} x[n, c, S i + p, S j + q],

a Max over two indices, kept whole: its argmax is one int, ``a = p*W + q`` (the first largest
entry in row-major order wins a tie, and a NaN is a window's largest, as in torch). The
backward is derived: grad_out routed to each window's argmax, one scatter at S i W + S j + a.
No window reads past the end (HO = (H - kernel_size) // stride + 1), so no read is
zero-padded; F.max_pool2d's padding would pad with -inf instead of 0."""

from derive import Op

OP = Op(
    name="max_pool2d",
    doc="F.max_pool2d(x, kernel_size, stride): the largest entry of each window, no padding.",
    inputs=["x[N, C, H, W]"],
    params={"kernel_size": 2, "stride": "kernel_size"},
    sizes={
        "K": "kernel_size",
        "HO": "(H - kernel_size) // stride + 1",
        "WO": "(W - kernel_size) // stride + 1",
    },
    ranges={"p": "K", "q": "K", "i": "HO", "j": "WO"},
    definitions=["out[n, c, i, j] = Max(x[n, c, stride*i + p, stride*j + q], p, q)"],
)
