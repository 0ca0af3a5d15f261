"""A quotient by a sum times a function of a scalar (fuzz --range 891004): the derivative of
a / D is -a dD / D**2, and D**2 underflows (softplus(w) = 1e-174 squared is 0 in float64) or
overflows (S = e**400) where the quotient and the gradient are finite. The lowering divides by
D twice instead of forming D**2 (arithmetic.DIVIDE_TIMES)."""

from derive import Op

OP = Op(
    name="quotient_by_a_product",
    doc="x / (Sum(exp(x)) softplus(w)) and 1 / (Sum(exp(x)) cosh(w)).",
    inputs=["x[G]", "w"],
    definitions=[
        "S = Sum(exp(x[b]), b)",
        "out[g] = x[g] / (S * softplus(w)) + 1 / (S * cosh(w))",
    ],
)
