"""The derivative of a kink whose argument is a param, not a tensor: d/dx minimum(x, x + lo) is
Heaviside(lo) + Heaviside(-lo) halves, a step of a number, evaluated in python (fuzz seed
141325 was refused: "a step of a number is not supported"). One param of each sign."""

from derive import Op

OP = Op(
    name="step_of_a_param",
    doc="out[k] = minimum(x[k], x[k] + lo) * maximum(x[k], x[k] + hi), lo < 0 < hi",
    inputs=["x[K]"],
    definitions=["out[k] = minimum(x[k], x[k] + lo) * maximum(x[k], x[k] + hi)"],
    params={"lo": -1.5, "hi": 0.5},
)
