"""softplus(x)**y, y a tensor (found by probing, 2026-11-25): softplus is positive, so SymPy
settled the mask ``softplus(x) = 0`` of d b**y/dy = b**y log b as never selecting and dropped
it; in float64 softplus(-800) is 0 and dy was 0 * -inf = NaN (torch: 0). The mask is a
comparison of float values SymPy does not decide (functions.zero_in_floats)."""

from derive import Op

OP = Op(
    name="softplus_power",
    inputs=["x[N]", "y[N]"],
    definitions=["out[n] = softplus(x[n])**y[n]"],
)
