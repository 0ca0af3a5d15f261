"""Maximums and minimums nested (found by probing, 2026-11-25): SymPy flattened
``maximum(maximum(x, y), z)`` into ``Max(x, y, z)``, whose derivative in each argument is 1/2
at a three-way tie (3/2 in all; torch's nested maximums give 1/4, 1/4, 1/2); a nested one is
now a definition of its own (language.ranges.nested), read twice here and defined once."""

from derive import Op

OP = Op(
    name="nested_maximums",
    inputs=["x[N]", "y[N]", "z[N]"],
    definitions=[
        "out[n] = maximum(maximum(x[n], y[n]), z[n]) + minimum(x[n], minimum(y[n], 0))"
        " + maximum(maximum(x[n], y[n]), 0)**2"
    ],
)
