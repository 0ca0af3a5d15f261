"""Graph attention's aggregation: a softmax over each node's incoming edges, shifted by their
maximum, weighting the messages of the edges' sources."""

from derive import Op

OP = Op(
    name="gat_softmax",
    inputs=["s[E, K]", "m[V, K, D]", "src[E]: int64", "dst[E]: int64"],
    ranges={"v": "V"},
    definitions=[
        "mx[v, k] = Max(where(dst[e] == v, s[e, k], -inf), e)",
        "ex[e, k] = exp(s[e, k] - mx[dst[e], k])",
        "den[v, k] = Sum(where(dst[e] == v, ex[e, k], 0), e)",
        "out[v, k, d] = Sum(where(dst[e] == v, ex[e, k] / den[v, k] * m[src[e], k, d], 0), e)",
    ],
)
