"""A sum whose index's only read cancels as SymPy evaluates the text (found probing the
language, 2026-11-26): ``x[n, m] - x[n, m]`` is 0, so the body no longer subscripts anything
with m and its range was "cannot be inferred"; the text still writes ``x[n, m]``, which gives
m's range (M), as a user reads it."""

from derive import Op

OP = Op(
    name="sum_whose_read_cancels",
    inputs=["x[N, M]", "y[N]"],
    definitions=["out[n] = Sum(x[n, m] - (x[n, m] - y[n]), m)"],
)
