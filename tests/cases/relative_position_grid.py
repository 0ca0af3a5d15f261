"""Window attention with a 2-D relative-position table (Swin's bias): tokens on an I x J grid,
one learned number per head and offset (i - p, j - r), from a (2I - 1) x (2J - 1) table. Its
adjoint sums the scores' adjoint along both offsets; gathered inside the sums it asked for a
26.6 GB temporary at 64 windows of 7 x 7, 4 heads, D 32 (found probing); taken at every
position and gathered after, 1.78x autograd's time and 1.05x its memory."""

from derive import Op

OP = Op(
    name="relative_position_grid",
    inputs=["q[B, H, I, J, D]", "k[B, H, I, J, D]", "v[B, H, I, J, D]", "tab[H, II, JJ]"],
    definitions=[
        "sc[b, h, i, j, p, r] = Sum(q[b, h, i, j, d] * k[b, h, p, r, d], d) / sqrt(D)"
        " + tab[h, i - p + I - 1, j - r + J - 1]",
        "mx[b, h, i, j] = Max(sc[b, h, i, j, p, r], p, r)",
        "e[b, h, i, j, p, r] = exp(sc[b, h, i, j, p, r] - mx[b, h, i, j])",
        "out[b, h, i, j, d] = Sum(e[b, h, i, j, p, r] * v[b, h, p, r, d], p, r)"
        " / Sum(e[b, h, i, j, p, r], p, r)",
    ],
)
