"""Two sums whose grouped factor is one expression up to index names, over other ranges.

``where(j <= k, exp(x[n, p]), 0)`` over J x K and ``where(a <= b, exp(x[n, p]), 0)`` over
A x B: the lowering remembers a grouped factor under a key free of index names, and j, k
(a, b) are pinned by no subscript of it, so the second sum read the first's J x K tensor:
the gradient of z came out (N, J, K, M)-shaped (an error through autograd's shape check, a
wrong-shaped gradient from ``backward`` called by hand). The key now holds the ranges of
such indices (``memo._unpinned``)."""

from derive import Op

OP = Op(
    name="one_mask_over_two_ranges",
    inputs=["x[N, P]", "y[N, J, K, M]", "z[N, A, B, M]"],
    definitions=[
        "out[p, m] = Sum(where(j <= k, exp(x[n, p]), 0) * y[n, j, k, m], n, j, k)"
        " + Sum(where(a <= b, exp(x[n, p]), 0) * z[n, a, b, m], n, a, b)",
    ],
)
