"""An additive causal mask, as attention is often written: scores + where(j <= i, 0, -inf)."""

# Written by hand beside fuzz 740143 (`where(b <= 0, inf, 0)`): the same class at the shape
# attention takes. where() of two numbers was lowered as c * (0 - (-inf)) + (-inf): inf - inf
# where c holds, 0 * inf where it fails, and the softmax came out all NaN, silently.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="additive_mask",
    doc="a causal softmax whose mask is added to the scores",
    inputs=["x[T, T]"],
    definitions=[
        "m[i] = Max(x[i, j] + where(j <= i, 0, -inf), j)",
        "e[i, j] = exp(x[i, j] + where(j <= i, 0, -inf) - m[i])",
        "p[i, j] = e[i, j] / Sum(e[i, k], k)",
    ],
)

SEED = 1
