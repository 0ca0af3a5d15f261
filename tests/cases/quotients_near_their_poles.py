"""Quotients whose derivatives SymPy's cancel multiplies out: ``x / (x - 1)``'s is
``-g / (x**2 - 2 x + 1)``, 9e-5 off at x = 1 + 1e-6 (found by probing); factored back, it is
``-g / (x - 1)**2`` (derive.symbolic.simplify._factored)."""

from derive import Op

OP = Op(
    name="quotients_near_their_poles",
    doc="x / (x - 1) + (y - 1) / (y + 1) + y / (1 + y * y).",
    inputs=["x[N]", "y[N]"],
    definitions=["out[n] = x[n] / (x[n] - 1) + (y[n] - 1) / (y[n] + 1) + y[n] / (1 + y[n] * y[n])"],
)
