"""A depthwise causal 1-d convolution (issue 25): the short convolution of modern sequence
models (Mamba's, H3's, Hyena's), each channel filtered by its own K taps over its own past,

    out[n, c, t] = sum_k x[n, c, t + k - (K - 1)] w[c, k] + b[c],

read before the sequence's start as 0 (left padding K - 1), so the output has the input's
length T and position t reads positions t - K + 1 .. t alone: no future leaks in. It is
F.conv1d(x, w[:, None], b, padding=K - 1, groups=C) cut to its first T positions. The backward
is derived: dx correlates grad_out with the taps reversed, reading only positions >= t (the
adjoint of a causal map is anti-causal), dw correlates x with grad_out."""

from derive import Op

OP = Op(
    name="causal_conv1d",
    doc="Depthwise causal conv1d: F.conv1d(x, w[:, None], b, padding=K-1, groups=C)[..., :T].",
    inputs=["x[N, C, T]", "w[C, K]", "b[C]"],
    ranges={"t": "T"},
    definitions=["out[n, c, t] = Sum(x[n, c, t + k - (K - 1)] * w[c, k], k) + b[c]"],
)
