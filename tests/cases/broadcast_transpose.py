"""Issue 9 item 1: no Sum; dZz came back with shape (M, G) instead of (G, M)."""

from derive import Op

OP = Op(
    name="broadcast_transpose",
    inputs=["Zz[G, M]", "h[M, T]"],
    definitions=["out[t, m, g] = Zz[g, m] * h[m, t]"],
)
