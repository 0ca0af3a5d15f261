"""Fuzz seed 5463: a delta mask inside a sum that is one factor of a contraction (was refused:
the contraction lowered its factors before the sum's index ranges were known)."""

from derive import Op

OP = Op(
    name="mask_inside_a_contraction",
    inputs=["b2[F]", "Wq[F, H, J]", "cls[F]: int64"],
    definitions=[
        "emb[j, kk] = Sum(b2[v] * Wq[b, j, kk], v, b)",
        "act2 = Sum(b2[kk] * cos(b2[kk]) + emb[n, cls[kk]], kk, n)",
    ],
)
