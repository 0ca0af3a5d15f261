"""A segment mean, as a graph network pools its nodes: each row of x added into its
segment's row, ``where(seg[n] == g, x[n, d], 0)`` summed over n, and the segment's count.
seg is compared, never a subscript: an entry outside [0, G) (a -1 padding row) belongs to
no segment and adds nothing. Lowered as written, the equality was an (N, G) mask broadcast
against x, an (N, G, D) product: 212x autograd's time on a segment sum (found probing); it
is one index_add_ forward and one gather backward (derive/lower/equalities.py)."""

from derive import Op

OP = Op(
    name="segment_sums",
    inputs=["x[N, D]", "seg[N]: int64", "b[G, D]"],
    ranges={"g": "G"},
    definitions=[
        "s[g, d] = b[g, d] + Sum(where(seg[n] == g, x[n, d], 0), n)",
        "c[g] = Sum(where(seg[n] == g, 1, 0), n)",
        "out[g, d] = tanh(s[g, d]) / (1 + c[g])",
    ],
)
