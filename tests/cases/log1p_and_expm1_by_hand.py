"""log(1 + x) and e^x - 1 as a user writes them: 1 + x rounds away x's low bits before the log
sees them (float32 at x = 1e-4: ~5,000 ulps; float64 at 1e-10: 1e-8 relative), and e^x - 1
cancels the same way. The forward computes log1p and expm1 (identities.ACCURACY_RULES), and so
does the backward: dy = 1 / (e^y - 1) is 1 / expm1(y), finite at y = 1e-30 (fourteenth
session)."""

from derive import Op

OP = Op(
    name="log1p_and_expm1_by_hand",
    doc="log(1 + x**2) + exp(x) - 1 + log(1 - exp(-y)), element-wise.",
    inputs=["x[N]", "y[N]"],
    definitions=["out[n] = log(1 + x[n]**2) + exp(x[n]) - 1 + log(1 - exp(-y[n]))"],
)
