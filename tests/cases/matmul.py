"""Issue 9 item 1: a plain matrix product; was emitted as b.T @ a.T."""

from derive import Op

OP = Op(
    name="matmul",
    inputs=["a[I, J]", "b[J, M]"],
    definitions=["out[i, m] = Sum(a[i, j] * b[j, m], j)"],
)
