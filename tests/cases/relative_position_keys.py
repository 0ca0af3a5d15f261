"""Relative keys (Shaw et al.): each query meets a learned vector per offset t - s besides
the key, ``sum_d q (k + R[t - s + T - 1])``. The scores' table part is ``q @ R^T`` read at
the offsets, and the table's adjoint a (T, T, D) contraction read along its diagonals; each
was a gather over the offsets and D as well, (B, T, T, D) and (B, T, 2T - 1, D), 75x
autograd's time (found probing)."""

from derive import Op

OP = Op(
    name="relative_position_keys",
    inputs=["q[B, T, D]", "k[B, T, D]", "v[B, T, D]", "R[TT, D]"],
    definitions=[
        "sc[b, t, s] = Sum(q[b, t, d] * (k[b, s, d] + R[t - s + T - 1, d]), d)",
        "mx[b, t] = Max(sc[b, t, s], s)",
        "e[b, t, s] = exp(sc[b, t, s] - mx[b, t])",
        "out[b, t, d] = Sum(e[b, t, s] * v[b, s, d], s) / Sum(e[b, t, s], s)",
    ],
)
