"""A stepwise op whose output does not read one of its definitions (a1 = sinh(b**3)): every
tensor off the path to the output has adjoint 0, computed as zeros, not as 0 * cosh(b**3),
which is NaN once b**3 overflows cosh (fuzz range probe, seed 120067)."""

from derive import Op

OP = Op(
    name="dead_branch",
    doc="u = sum_k v[k]**2; a1 = sinh(b**3) is computed and not read",
    inputs=["b[K]", "v[K]"],
    definitions=["a1[k] = sinh(b[k] ** 3)", "u = Sum(v[k] * v[k], k)"],
    stepwise=True,
)
