"""A 1-d convolution, F.conv1d's cross-correlation with zero padding (issue 25), with stride,
padding, dilation and ``groups`` as conv2d's (ops/conv2d.py): x and w viewed per group, one
correlation per group,

    out[n, g, o, t] = sum_{c, k} x[n, g, c, S t + D k - P] w[g, o, c, k] + b[g, o],

read outside x as 0. The backward is derived (dx a conv_transpose1d of grad_out with w, dw a
conv1d of x with grad_out: derive/lower/windows.py recognises both)."""

from derive import Op

OP = Op(
    name="conv1d",
    doc="F.conv1d(x, w, b, stride, padding, dilation, groups): a 1-d convolution, zero-padded.",
    inputs=["x[N, C, T]", "w[O, CG, K]", "b[O]"],
    params={"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    sizes={
        "CG": "C / groups",
        "OG": "O / groups",
        "L": "(T + 2*padding - dilation*(K - 1) - 1) // stride + 1",
    },
    ranges={"t": "L"},
    definitions=[
        "xg = view(x, N, groups, CG, T)",
        "wg = view(w, groups, OG, CG, K)",
        "bg = view(b, groups, OG)",
        "outg[n, g, o, t] = Sum(xg[n, g, c, stride*t + dilation*k - padding] * wg[g, o, c, k],"
        " c, k) + bg[g, o]",
        "out = view(outg, N, O, L)",
    ],
)
