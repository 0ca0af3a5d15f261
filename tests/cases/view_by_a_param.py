"""A view whose dimension is an int param (issue 25): x's T steps cut into P blocks of k, a
derived size T / k the forward checks is whole. The reference reads k's value for the view."""

from derive import Op

OP = Op(
    name="view_by_a_param",
    doc="sum of squares of each block of k steps, times tanh of its sum.",
    inputs=["x[N, T]"],
    params={"k": 2},
    sizes={"P": "T / k"},
    definitions=[
        "y = view(x, N, P, k)",
        "out[n, p] = Sum(y[n, p, j] ** 2, j) * tanh(Sum(y[n, p, j], j))",
    ],
)
