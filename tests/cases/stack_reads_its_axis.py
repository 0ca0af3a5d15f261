"""One row of a masked softmax read at a constant (``Zz[p] = Kx[1, p]``): du[i] is
delta(i, 1) times a sum that reads u[i] and Wq[i], stacked over i; each slice must read its
coefficient at i = k (fuzz seed 92449: the stack lowered it over the other axes with i still
free, and refused a valid op)."""

from derive import Op

OP = Op(
    name="stack_reads_its_axis",
    doc="Row 1 of exp(W - max W) with W masked causally, u scaling each row.",
    inputs=["z[2, R]", "u[2]"],
    definitions=[
        "W[l, t2] = where(t2 <= l, z[0, t2] * u[l], -inf)",
        "Wq[l] = Max(W[l, t2], t2)",
        "Kx[l, t2] = exp(W[l, t2] - Wq[l])",
        "Zz[p] = Kx[1, p]",
    ],
)
