"""e^x / (e^x - 1), and the powers of expm1 its derivatives divide by (found by probing,
2026-11-27): the gradient -e^(2x) / expm1(x)**2 - ... and the tangent were inf / inf = nan past
|x| = 710, where they are finite (0 as a double): e^(jx) / expm1(x)**k is rewritten with
-1 / expm1(-x) for each e^x (identities, "exp-over-expm1"), in the forward-mode tangents too."""

from derive import Op

OP = Op(
    name="exp_over_expm1",
    inputs=["x[N]"],
    definitions=["out[n] = exp(x[n]) / (exp(x[n]) - 1)"],
)
