"""Derived sizes with a floor division multiplied or negated (found by probing, 2026-11-27):
``2 * (T // p)`` was printed ``2*(T) // p``, which python reads as ``(2*T) // p``, and the
ceiling ``-(-T // p)`` was ``(-(-T)) // p``: a wrong size, and a wrong value where the size is
read as a number, with nothing refused (`derive check` caught the shape)."""

from derive import Op

OP = Op(
    name="sizes_that_multiply_a_floor",
    inputs=["x[N, T]"],
    params={"p": 2},
    sizes={"L": "2 * (T // p)", "C": "-(-T // p)"},
    ranges={"t": "L", "c": "C"},
    definitions=[
        "a[n, t] = x[n, p*t + 1] * L",
        "b[n, c] = x[n, p*c] * C",
        "out[n] = Sum(a[n, t], t) + Sum(b[n, c]**2, c)",
    ],
)
