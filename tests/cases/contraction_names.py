"""Issue 9 item 1: x[N, I], z[N, J]; was emitted as z.T @ x, shape (J, I)."""

from derive import Op

OP = Op(
    name="contraction_names",
    inputs=["x[N, I]", "z[N, J]"],
    definitions=["out[i, j] = Sum(x[n, i] * z[n, j], n)"],
)
