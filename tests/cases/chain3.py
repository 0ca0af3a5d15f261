"""Issue 9 item 1: a three-matrix chain."""

from derive import Op

OP = Op(
    name="chain3",
    inputs=["a[I, J]", "b[J, K]", "c[K, L]"],
    definitions=["out[i, l] = Sum(a[i, j] * b[j, k] * c[k, l], j, k)"],
)
