"""The backward folds Sum(a1*gain, u) to Wq times Wq's own denominator, written as defined:
Sum(a1[w, s, o] + 1, s), whose Sum(1, s) the lowering refused ("sum over unused index"). A sum
of a body without its index is now its extent times the body (fuzz seed 160862)."""

from derive import Op

OP = Op(
    name="constant_sum_from_a_fold",
    doc="Wq = sum_u a1 gain / sum_s (a1 + 1), read at picks",
    inputs=["y[G, G, G]", "gain[G, 3, G]", "idx[J, J]: int64"],
    definitions=[
        "a1[t2, t, n] = y[t2, n, t]",
        "Wq[o, mm, w] = Sum(a1[u, mm, o] * gain[w, 1, u], u) / Sum(a1[w, s, o] + 1, s)",
        "act2[j, i, t] = Wq[idx[t, i], idx[j, i], idx[j, t]]",
    ],
)
