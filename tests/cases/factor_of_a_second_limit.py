"""A product that sums over two indices at once, sum_{q,h} dz[...] Kx[h], read through the
fold hid = -Kx: the fold moves the factor -Kx[c] outside into the sum, folds, and moves back
out what reads none of the sum's indices. It tested only the first (q), so Kx[h] left its
sum with h free (fuzz seed 96606: refused at lowering; the adjoint was wrong)."""

from derive import Op

OP = Op(
    name="factor_of_a_second_limit",
    doc="s[o, v] = -x[v] z[Y[o]] sum_b z[labels[v, b]], z = x * sum exp(x).",
    inputs=["hid[H]", "Y[Q]: int64", "labels[H, N]: int64"],
    definitions=[
        "Kx[ij] = -hid[ij]",
        "z[aa] = hid[aa] * Sum(exp(hid[y]), y)",
        "s[o, v] = Kx[v] * z[Y[o]] * Sum(z[labels[v, b]], b)",
    ],
)
