"""sign() of a param (found by probing, 2026-11-25): python's form was ``math.copysign(1.0,
alpha)``, 1 at alpha = 0 where torch.sign is 0: the output and gradient x and 1 instead of 0,
silently. Now ``float((alpha > 0) - (alpha < 0))``."""

from derive import Op

OP = Op(
    name="sign_of_a_param",
    inputs=["x[N]"],
    params={"alpha": 1.0},
    definitions=["out[n] = x[n] * sign(alpha)"],
)
