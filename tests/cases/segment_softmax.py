"""A softmax over each segment's entries, shifted by the segment's maximum (a graph
attention's normalisation over a node's incoming edges): the Max under an equality is one
scatter_reduce, its argmax the least entry that attains it (found surveying: the where()
laid out over (G, K, N), 511x autograd's time on the maximum alone). ``b`` gives G."""

from derive import Op

OP = Op(
    name="segment_softmax",
    inputs=["s[N, K]", "seg[N]: int64", "b[G, K]"],
    ranges={"g": "G"},
    definitions=[
        "mx[g, k] = Max(where(seg[n] == g, s[n, k], -inf), n)",
        "ex[n, k] = exp(s[n, k] - mx[seg[n], k])",
        "den[g, k] = b[g, k]**2 + Sum(where(seg[n] == g, ex[n, k], 0), n)",
        "out[n, k] = ex[n, k] / den[seg[n], k]",
    ],
)
