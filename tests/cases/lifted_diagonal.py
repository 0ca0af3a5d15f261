"""A costly call over a diagonal read, lifted into a tensor of its own: its indices were taken
from the read one per subscript, so ``exp(logits[n1, n1, ...])`` became a tensor over
(n1, n1, o) that nothing could lower (fuzz seeds 1003, 91263: refused a valid op)."""

from derive import Op

OP = Op(
    name="lifted_diagonal",
    doc="log1p(F exp(.)) of a diagonal entry picked through an int tensor.",
    inputs=["logits[M, M, F]", "labels[M, I]: int64"],
    definitions=["W[o, n1] = log1p(F * exp(logits[n1, n1, labels[n1, o]]))"],
)
