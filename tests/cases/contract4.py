"""Issue 9 item 1: a 4-index contraction with the output axes permuted."""

from derive import Op

OP = Op(
    name="contract4",
    inputs=["p[A, B, C, D]", "q[D, B, E]"],
    definitions=["out[e, c, a] = Sum(p[a, b, c, d] * q[d, b, e], b, d)"],
)
