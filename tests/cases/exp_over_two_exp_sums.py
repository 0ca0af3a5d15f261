"""An exp over a product of two sums of exps, one of them read through an index (fuzz --range
--powers 1179003, shrunk): the quotient rule's adjoint of y multiplies exp(logits) by exp(y),
which SymPy writes as one exp(logits + y), inf where both are near 450, while exp(y) over its
own sum is at most 1. It is taken out as that ratio (``exps_over_their_sums``,
derive/lower/arithmetic.py), also where it sits inside the sum over (p, s) that the gathered
read's adjoint scatters: dy was NaN where autograd's was finite. Stepwise, as the fuzzer writes
its ops (every intermediate's gradient): the exps are then computed again in the backward, not
saved under names, and SymPy merges them."""

from derive import Op

OP = Op(
    name="exp_over_two_exp_sums",
    inputs=["logits[T, Z, L]", "y[Z, Z, T, L]", "X[L, T]: int64"],
    definitions=[
        "b2[p, ij, s] = exp(logits[p, ij, s]) / (Sum(exp(y[w, ij, p, s]), w)"
        " * Sum(exp(y[ij, X[j, kk], kk, j]), kk, j))"
    ],
    stepwise=True,
)
