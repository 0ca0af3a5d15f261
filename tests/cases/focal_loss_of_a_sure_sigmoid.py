"""A focal loss on a sigmoid's prediction, its focusing exponent a param below 1 (found by
probing, 2026-11-27): d(1 - p)**gamma is gamma (1 - p)**(gamma - 1), inf where p rounds to 1
(x = 40 in float64) for gamma < 1, and the chain's factor p (1 - p) was kept outside the sum
that held it: 0 * inf = nan where the forward's (1 - p)**gamma log(p) is 0. The factor goes
into the term (simplify._raised): gamma (1 - p)**gamma p log(p), finite wherever the forward
is; at 1 < gamma < 2 the second order likewise."""

from derive import Op

OP = Op(
    name="focal_loss_of_a_sure_sigmoid",
    inputs=["x[N]"],
    params={"gamma": 0.5},
    definitions=[
        "p[n] = sigmoid(x[n])",
        "loss = -Sum((1 - p[n])**gamma * log(p[n]), n)",
    ],
)
