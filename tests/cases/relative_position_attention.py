"""Attention with a learned relative-position table (T5's bias): one number per head and
offset t - s, read from a table of 2T - 1 entries inside the softmax. The table's adjoint is
the scores' adjoint summed along its diagonals; taken at the diagonals before its sums (a
gather of grad_out under the sum over d, a (B, H, T, 2T - 1, D) temporary) it ran 73x
autograd's time (found probing); the scores' adjoint is now made at (t, s) and read at the
diagonals after (:func:`derive.lower.reductions._gathered_late`)."""

from derive import Op

OP = Op(
    name="relative_position_attention",
    inputs=["q[B, H, T, D]", "k[B, H, T, D]", "v[B, H, T, D]", "tab[H, TT]"],
    definitions=[
        "sc[b, h, t, s] = Sum(q[b, h, t, d] * k[b, h, s, d], d) / sqrt(D) + tab[h, t - s + T - 1]",
        "mx[b, h, t] = Max(sc[b, h, t, s], s)",
        "e[b, h, t, s] = exp(sc[b, h, t, s] - mx[b, h, t])",
        "out[b, h, t, d] = Sum(e[b, h, t, s] * v[b, h, s, d], s) / Sum(e[b, h, t, s], s)",
    ],
)
