"""A softmax over each segment's entries, shifted by the segment's maximum and scaled per
segment: the shift cancels (each segment's sum of exps holds it), so its adjoint is 0 and no
argmax is kept. Seen through the segments' equality: under ``where(seg[n] == seg[n1], ..)``
a factor that reads n1 only through ``seg[n1]`` (``1 / den[seg[n1]]``) is read at
``seg[n]``, out of the sum over n1, and what is left is den's own sum."""

from derive import Op

OP = Op(
    name="segment_softmax_scaled",
    inputs=["s[N, K]", "seg[N]: int64", "b[G, K]"],
    ranges={"g": "G"},
    definitions=[
        "mx[g, k] = Max(where(seg[n] == g, s[n, k], -inf), n)",
        "ex[n, k] = exp(s[n, k] - mx[seg[n], k])",
        "den[g, k] = Sum(where(seg[n] == g, ex[n, k], 0), n)",
        "out[n, k] = b[seg[n], k] * ex[n, k] / den[seg[n], k]",
    ],
)
