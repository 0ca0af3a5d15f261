"""A 2-d convolution, F.conv2d's cross-correlation with zero padding (issue 25): the same
stride, padding and dilation along both axes, and ``groups``: the C input channels and the O
output channels split into ``groups`` blocks, block g of the output reading block g of the input
alone. The blocks are views (x as N x groups x C/groups x H x W, w as groups x O/groups x
C/groups x KH x KW), so the contraction is one correlation per group,

    out[n, g, o, i, j] = sum_{c, p, q} x[n, g, c, S i + D p - P, S j + D q - P] w[g, o, c, p, q]
                         + b[g, o],

read outside x as 0. The backward is derived: dx is a transposed convolution of grad_out with w,
dw a correlation of x with grad_out (derive/lower/windows.py recognises both, groups as the
axis that x, w and the result share)."""

from derive import Op

OP = Op(
    name="conv2d",
    doc="F.conv2d(x, w, b, stride, padding, dilation, groups): a 2-d convolution, zero-padded.",
    inputs=["x[N, C, H, W]", "w[O, CG, KH, KW]", "b[O]"],
    params={"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    sizes={
        "CG": "C / groups",
        "OG": "O / groups",
        "HO": "(H + 2*padding - dilation*(KH - 1) - 1) // stride + 1",
        "WO": "(W + 2*padding - dilation*(KW - 1) - 1) // stride + 1",
    },
    ranges={"i": "HO", "j": "WO"},
    definitions=[
        "xg = view(x, N, groups, CG, H, W)",
        "wg = view(w, groups, OG, CG, KH, KW)",
        "bg = view(b, groups, OG)",
        "outg[n, g, o, i, j] = Sum(xg[n, g, c, stride*i + dilation*p - padding,"
        " stride*j + dilation*q - padding] * wg[g, o, c, p, q], c, p, q) + bg[g, o]",
        "out = view(outg, N, O, HO, WO)",
    ],
)
