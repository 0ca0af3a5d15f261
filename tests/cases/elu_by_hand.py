"""ELU written with where(): its backward gates exp(x), which is inf at x = 1e4 where the gate
is 0. Lowered as a 0/1 mask multiplied in (an addcmul), 0 * inf made the gradient NaN; a gate
selects (torch.where), as torch's own ELU backward does."""

from derive import Op

OP = Op(
    name="elu_by_hand",
    doc="x where x > 0, exp(x) - 1 elsewhere.",
    inputs=["x[N]"],
    definitions=["out[n] = where(x[n] > 0, x[n], exp(x[n]) - 1)"],
)
