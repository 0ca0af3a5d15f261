"""An output that reads its inputs through a step only (a count of the positive entries of a
contraction): every gradient is 0. The reference's autograd found nothing to differentiate and
stopped with a RuntimeError (fuzz seed 281431); its gradients are now zeros, as the module's."""

from derive import Op

OP = Op(
    name="output_through_a_step",
    inputs=["gain[J]", "a1[M, J]"],
    definitions=[
        "z[j] = Sum(gain[j] * a1[m, j], m)",
        "count = Sum(where(z[j] >= 0, 3, 0), j)",
    ],
)
