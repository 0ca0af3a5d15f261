"""F.normalize written inline (found by probing, 2026-11-27): the derivative of x / sqrt(S)
has S**(-3/2), and S**(3/2) overflowed at x = 1e103 in float64 (1e13 in float32) where the
gradient is 1e-104: the projection term was 0 and the gradient silently wrong (and -inf at
x = 1e-110, where S**(3/2) underflows). The lowering divides by S, then by sqrt(S)."""

from derive import Op

OP = Op(
    name="l2_normalize_inline",
    inputs=["x[N, D]"],
    definitions=["out[n, d] = x[n, d] / sqrt(Sum(x[n, k]**2, k))"],
)
