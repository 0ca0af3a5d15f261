"""A param's power of 1 - tanh(x) (found by probing, 2026-11-27): tanh's derivative
1 - tanh**2 holds the power's base only once factored, (1 - t)(1 + t); kept whole beside
(1 - t)**(g - 1), it was 0 * inf = nan at g < 1 where tanh rounds to 1 (x = 20 in float64).
Since 2026-11-29 1 - tanh(x) is read as 2 sigmoid(-2x), and the power of that product takes
sigmoid's own factor s from its derivative (derive/lower/arithmetic._took_its_factors)."""

from derive import Op

OP = Op(
    name="power_of_one_minus_tanh",
    inputs=["x[N]"],
    params={"g": 0.5},
    definitions=["loss = Sum((1 - tanh(x[n]))**g * x[n], n)"],
)
