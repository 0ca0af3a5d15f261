"""A shift by one step (issue 25): x[n, t - 1] is 0 at t = 0 (zero padding)."""

from derive import Op

OP = Op(
    name="shift",
    doc="tanh of x shifted right by one step, times y.",
    inputs=["x[N, T]", "y[N, T]"],
    definitions=["out[n, t] = tanh(x[n, t - 1]) * y[n, t]"],
)
