"""Mean cross-entropy over a sequence, positions whose target is -1 ignored (makemore's padding).

The seed's cross-entropy steps per position, then the ignore_index written as what it is: a
position counts where its target is not -1, ``where(targets[b, t] != -1, ..., 0)``, and the
mean divides by the number of counted positions, ``Sum(where(targets[b, t] != -1, 1, 0), b,
t)`` (0 of them gives NaN, as F.cross_entropy does). Every read of targets as a subscript sits
under that guard, so the generated code reads ``targets.clamp(min=0)`` there (a -1 picks
nothing the where keeps) and refuses any other target outside [0, V), -5 as F.cross_entropy
does (``>= 0`` ignored every negative target, which torch refuses; found by probing); the
backward's one-hot is a scatter_add_ whose ignored rows add 0, ``dlogits = g * mask * (probs -
onehot) / count``.
"""

from derive import Op

OP = Op(
    name="sequence_cross_entropy",
    doc="Mean cross-entropy of logits[B, T, V] against targets[B, T], ignoring targets of -1 "
    "(F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)).",
    inputs=["logits[B, T, V]", "targets[B, T]: int64"],
    definitions=[
        "logit_maxes[b, t] = Max(logits[b, t, v], v)",
        "norm_logits[b, t, v] = logits[b, t, v] - logit_maxes[b, t]",
        "counts[b, t, v] = exp(norm_logits[b, t, v])",
        "counts_sum[b, t] = Sum(counts[b, t, v], v)",
        "probs[b, t, v] = counts[b, t, v] / counts_sum[b, t]",
        "logprobs[b, t, v] = log(probs[b, t, v])",
        "loss = -Sum(where(targets[b, t] != -1, logprobs[b, t, targets[b, t]], 0), b, t)"
        " / Sum(where(targets[b, t] != -1, 1, 0), b, t)",
    ],
)
