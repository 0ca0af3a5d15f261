"""tanh of a product that overflows: hid = tanh(exp(-W1) logits), logits = max sinh(W1).

At |W1| = 450, exp(-W1) logits is inf and hid is +-1, so 1 - hid**2 is 0. Autograd multiplies
in chain order, so the 0 comes first; distributed as (exp(-W1) logits) - (exp(-W1) logits) hid**2,
the backward read inf - inf (fuzz --range seed 120334, shrunk)."""

from derive import Op

OP = Op(
    name="saturated_tanh_of_a_product",
    doc="tanh(exp(-W1) logits) with logits the column maxima of sinh(W1)",
    inputs=["W1[Z, Z]"],
    definitions=[
        "logits[b] = Max(sinh(W1[z, b]), z)",
        "hid[t, i] = tanh(exp(-W1[i, t]) * logits[i])",
    ],
)
