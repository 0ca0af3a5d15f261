"""A 1-d convolution with stride 2 (issue 25): the output axis is (T - K) // 2 + 1 long; x's
adjoint solves the read 2*t + k for k (a gather over t), w's reads x at 2*t + k."""

from derive import Op

OP = Op(
    name="conv1d_strided",
    doc="F.conv1d(x, w, stride=2).",
    inputs=["x[N, C, T]", "w[O, C, K]"],
    sizes={"L": "(T - K) // 2 + 1"},
    ranges={"t": "L"},
    definitions=["out[n, o, t] = Sum(x[n, c, 2*t + k] * w[o, c, k], c, k)"],
)
