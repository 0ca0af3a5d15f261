"""1 +- tanh read as sigmoids (derive.identities, tanh-as-sigmoid) in each sign and scale, a
complement subtracted, one raised to a param (its power takes sigmoid's factor from the
derivative, arithmetic._took_its_factors): the rows' own case, where a wrong sign or factor of
2 would show against autograd on the text."""

from derive import Op

OP = Op(
    name="tanh_complements",
    inputs=["x[N]", "y[N]"],
    params={"g": 0.5},
    definitions=[
        "loss = Sum((1 - tanh(x[n])) * (3 + 3 * tanh(y[n])) + (2 - 2 * tanh(x[n] * y[n]))**g"
        " - (tanh(y[n]) - 1) * x[n], n)"
    ],
)
