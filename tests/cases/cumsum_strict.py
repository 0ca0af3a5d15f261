"""Running sums that leave the entry at t out, from the start and from the end (issue 25): two
triangular sums with strict masks, multiplied (so the second order mixes them)."""

from derive import Op

OP = Op(
    name="cumsum_strict",
    doc="(torch.cumsum(x, 1) - x) * (x.flip(1).cumsum(1).flip(1) - x).",
    inputs=["x[N, T]"],
    ranges={"t": "T"},
    definitions=["out[n, t] = Sum(where(s < t, x[n, s], 0), s) * Sum(where(s > t, x[n, s], 0), s)"],
)
