"""A graph network's message passing: each edge e carries its source node's features,
projected, to its destination, ``where(dst[e] == i, .., 0)`` summed over the edges. src is
a subscript (range-checked: a gather), dst is compared (an edge whose dst is no node adds
nothing). The messages were an (E, V) equality mask times the (E, F) projected rows, and
their adjoint the same mask's matmul (117x autograd's time, found probing): one index_add_
forward, one gather backward (derive/lower/equalities.py)."""

from derive import Op

OP = Op(
    name="gnn_messages",
    inputs=["x[V, D]", "src[E]: int64", "dst[E]: int64", "W[D, F]"],
    ranges={"i": "V"},
    definitions=[
        "h[e, f] = Sum(x[src[e], d] * W[d, f], d)",
        "out[i, f] = relu(Sum(where(dst[e] == i, h[e, f], 0), e))",
    ],
)
