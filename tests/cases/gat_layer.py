"""A GAT layer: a projection of the nodes, leaky-ReLU scores of each edge's two ends, a softmax
over each node's incoming edges weighting its sources' projections. The projection h is read by
x's and W's adjoints, and the softmax's denominator by every edge into a node: both adjoints
kept (derive/symbolic/cuts.py). ``el`` and ``er`` are GAT's names; el's gradient is not ``del``."""

from derive import Op

OP = Op(
    name="gat_layer",
    inputs=["x[V, F]", "W[F, K, D]", "asrc[K, D]", "adst[K, D]", "src[E]: int64", "dst[E]: int64"],
    ranges={"v": "V"},
    definitions=[
        "h[v, k, d] = Sum(x[v, f] * W[f, k, d], f)",
        "el[v, k] = Sum(h[v, k, d] * asrc[k, d], d)",
        "er[v, k] = Sum(h[v, k, d] * adst[k, d], d)",
        "z[e, k] = el[src[e], k] + er[dst[e], k]",
        "s[e, k] = where(z[e, k] > 0, z[e, k], 0.2 * z[e, k])",
        "mx[v, k] = Max(where(dst[e] == v, s[e, k], -inf), e)",
        "ex[e, k] = exp(s[e, k] - mx[dst[e], k])",
        "den[v, k] = Sum(where(dst[e] == v, ex[e, k], 0), e)",
        "out[v, k, d] = Sum(where(dst[e] == v, ex[e, k] / den[v, k] * h[src[e], k, d], 0), e)",
    ],
)
