"""softplus(x) - x = softplus(-x), found by probing: its gradient, g (sigmoid(x) - 1), came
out ``g - sigmoid(x)`` where the coefficient of x was 1 (the same rewrite as
log_sigmoid_of_a_difference's); a weight beside it, and another input, as users write it."""

from derive import Op

OP = Op(
    name="softplus_minus_its_argument",
    inputs=["x[N]", "w[N]", "y[N]"],
    definitions=["out[n] = w[n] * (softplus(x[n]) - x[n]) + softplus(y[n]) - y[n]"],
)
