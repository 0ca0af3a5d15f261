"""log(sigmoid(x) sigmoid(z)) written with exps: the definition rules make each factor a
sigmoid, the log splits (a sigmoid of a finite real is positive), and the forward rows then
read each log(sigmoid) as -softplus(-x): finite at x = -1e4 (the rows ran before the split)."""

from derive import Op

OP = Op(
    name="log_of_two_sigmoids",
    doc="log(1 / (1 + exp(-x)) / (1 + exp(-z))).",
    inputs=["x[N]", "z[N]"],
    definitions=["out[n] = log(1 / (1 + exp(-x[n])) / (1 + exp(-z[n])))"],
)
