"""Rows of two tables, each picked by its own int data, contracted: two gathers and a matmul,
forward and backward (as a broadcast product it was an N x P x K temporary; found probing).
The second definition reads one gather through a function: that factor is computed once
over (n, k), the other gather is an operand as it is."""

from derive import Op

OP = Op(
    name="two_gathers_contracted",
    inputs=["E[V, K]", "F[U, K]", "a[N]: int64", "b[P]: int64"],
    definitions=[
        "s[n, p] = Sum(E[a[n], k] * F[b[p], k], k)",
        "out[n, p] = s[n, p] + Sum(tanh(E[a[n], k]) * F[b[p], k], k)",
    ],
)
