"""The roots of norms_at_zero.py, each sum of squares a definition of its own, read by name: a
squared L2 norm, a mean of it, a distance whose squares are named entry by entry. At a zero row
the chain of the root's partial (inf) by the sum's (0) was NaN, as it was inline (found
reviewing the norm rule: it held only a root of a Sum written in place)."""

from derive import Op

OP = Op(
    name="norms_through_definitions",
    doc="An L2 norm, an RMS and a distance of the rows of x and y, the sums named.",
    inputs=["x[N, D]", "y[N, D]"],
    definitions=[
        "sq[n] = Sum(x[n, d]**2, d)",
        "norm[n] = sqrt(sq[n])",
        "ms[n] = sq[n] / D",
        "rms[n] = sqrt(ms[n])",
        "diff2[n, d] = (x[n, d] - y[n, d])**2",
        "sqd[n] = Sum(diff2[n, d], d)",
        "dist[n] = sqd[n]**(1/2)",
        "out[n] = norm[n] + rms[n] + dist[n]",
    ],
)
