"""``sqrt(-log(sigmoid(x)))`` step by step: its second order sums a term per step of the chain,
and a term's ``1 - sigmoid(x)`` left as it was made it 1e-3 off at x = 30 once the first
order read ``sigmoid(-x)`` (probing the written sums' fixes, twenty-third session)."""

from derive import Op

OP = Op(
    name="stepwise_root_of_a_log_sigmoid",
    inputs=["x[N]", "y[N]"],
    definitions=["a[n] = -log(sigmoid(x[n]))", "out[n] = sqrt(a[n]) * y[n]"],
    stepwise=True,
)
