"""A condition on an integer-valued function of float data (sign(x) >= 0): SymPy calls sign(x)
an integer, and the reference read it as a subscript and stopped (fuzz seed 310173); it is a
step in the data, compared as floats."""

from derive import Op

OP = Op(
    name="integer_valued_condition",
    inputs=["x[N, M]", "y[N, M]"],
    definitions=["out[n, m] = where(sign(x[n, m]) >= 0, x[n, m] * y[n, m], y[n, m])"],
)
