"""A relative-position bias, one learned number per offset t - s, read from a table of 2T - 1
entries inside an exp (T5's and ALiBi's learned cousins). The table's adjoint sums the
scores' adjoint over the batch first and then reads its diagonals (found probing: gathered
over the batch first, a (B, 2T - 1, T) temporary, 27x autograd's time for the bias alone)."""

from derive import Op

OP = Op(
    name="relative_position_bias",
    inputs=["s0[B, T, T]", "tab[TT]"],
    definitions=["out[b, t, s] = exp(s0[b, t, s] + tab[t - s + T - 1])"],
)
