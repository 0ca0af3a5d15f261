"""where() of two numbers whose difference rounds: a decay of 1 or 1e17 by sign, and 0.3 or 0.7."""

# Written by hand beside fuzz 740143, the next member of its class: where(c, a, b) of numbers
# was lowered as c * (a - b) + b, and (1 - 1e17) + 1e17 is 0 in float64, so where x > 0 the
# decay came out exp(0) = 1, not exp(-1) (a silently wrong forward, every value finite and
# small); (0.3 - 0.7) + 0.7 is an ulp off 0.3.
# The mask arithmetic is kept only where it is exact (a 0 branch, small integers).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="where_of_rounding_numbers",
    doc="a decay rate selected by sign from numbers far apart, plus an offset of 0.3 or 0.7",
    inputs=["x[N, C]"],
    definitions=[
        "g[n, c] = x[n, c] * exp(-where(x[n, c] > 0, 1, 1e17))",
        "out[n, c] = g[n, c] + where(x[n, c] > 0, 0.3, 0.7)",
    ],
)

SEED = 1
