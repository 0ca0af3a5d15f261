"""log(x y) over inputs of either sign: log(x y) is finite wherever x y > 0, log(x) + log(y)
(what SymPy's expand_log(force=True) made of it) is NaN where both are negative."""

from derive import Op

OP = Op(
    name="log_of_a_product",
    doc="log(x y) + log(exp(x) y z): the exp's log splits off, the rest stays one log.",
    inputs=["x[N]", "y[N]", "z[N]"],
    definitions=["out[n] = log(x[n] * y[n]) + log(exp(x[n]) * y[n] * z[n])"],
)
