"""Rows picked by int data and contracted with a matrix, an embedding and a linear layer in
one definition: the picked rows are one (N, K) tensor and the sum over k a matmul, forward and
backward (as a broadcast product over n, k and m it was an N x K x M temporary; found
probing). A second contraction reads a gather whose own index is summed."""

from derive import Op

OP = Op(
    name="gathered_rows_contracted",
    inputs=["Emb[V, K]", "W[K, M]", "idx[N]: int64", "perm[K]: int64"],
    definitions=[
        "h[n, m] = Sum(Emb[idx[n], k] * W[k, m], k)",
        "out[n, m] = h[n, m] + Sum(Emb[idx[n], perm[k]] * W[k, m], k)",
    ],
)
