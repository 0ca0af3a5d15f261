"""Roots of sums of squares, each zero somewhere a user meets it: a row's L2 norm, the distance
of a triplet loss at identical points (a difference squared), an RMS without eps (a mean of
squares, a size dividing). At a zero row the forward is 0 and finite, and the chain of
``sqrt``'s partial (inf) by the squares' (0) was NaN; the root's partial is taken as 0 there,
as torch.linalg.vector_norm's backward does (found by probing)."""

from derive import Op

OP = Op(
    name="norms_at_zero",
    doc="An L2 norm, a distance and an RMS of the rows of x and y, summed per row.",
    inputs=["x[N, D]", "y[N, D]"],
    definitions=[
        "norm[n] = sqrt(Sum(x[n, d]**2, d))",
        "dist[n] = sqrt(Sum((x[n, d] - y[n, d])**2, d))",
        "rms[n] = sqrt(Sum(y[n, d]**2, d) / D)",
        "out[n] = norm[n] + dist[n] + rms[n]",
    ],
)
