"""A cumulative sum as a triangular sum (issue 25): the output index t subscripts no tensor,
so its range is declared."""

from derive import Op

OP = Op(
    name="cumsum",
    doc="torch.cumsum(x, 1).",
    inputs=["x[N, T]"],
    ranges={"t": "T"},
    definitions=["out[n, t] = Sum(where(s <= t, x[n, s], 0), s)"],
)
