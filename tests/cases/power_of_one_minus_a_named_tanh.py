"""A param's power of 1 - t, t = tanh(x) a definition of its own (2026-11-29): the row that
reads 1 - tanh(x) as 2 sigmoid(-2x) does not see through the name, so the derivative is
g (1 - t)**(g - 1) (1 - t**2), and 1 - t**2 must be factored toward the power's base
(derive/symbolic/simplify._factored_toward: (1 - t)**g (1 + t)), else inf * 0 = nan where t
rounds to 1 (x = 20 in float64), as autograd's is."""

from derive import Op

OP = Op(
    name="power_of_one_minus_a_named_tanh",
    inputs=["x[N]"],
    params={"g": 0.5},
    definitions=["t[n] = tanh(x[n])", "loss = Sum((1 - t[n])**g * x[n], n)"],
)
