"""Messages weighted per edge and head, summed into each edge's destination: the gradient of
x sums ``a[e, k] W[f, k, d] grad_out[dst[e], k, d]`` over k and d, a product of a plain read,
a weight and a gathered read, contracted as one (the (E, K, D) product, then a matmul over
(k, d)), never as the nested sum over d first, an (E, F, K) batched product."""

from derive import Op

OP = Op(
    name="weighted_messages",
    inputs=["x[V, F]", "W[F, K, D]", "a[E, K]", "src[E]: int64", "dst[E]: int64"],
    ranges={"v": "V"},
    definitions=[
        "h[v, k, d] = Sum(x[v, f] * W[f, k, d], f)",
        "out[v, k, d] = Sum(where(dst[e] == v, a[e, k] * h[src[e], k, d], 0), e)",
    ],
)
