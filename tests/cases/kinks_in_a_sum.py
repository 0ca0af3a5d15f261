"""Powers of kinks beside each other (found by probing, 2026-11-25): the second order of
``relu(x)**1.5 + maximum(x, 0)**2.5`` holds both steps squared; a step's square is a gate
(lower.value.as_gate), but the sum was fused into an addcmul first, which skips gates and
took the square for a number: 0 * inf = nan at every x < 0."""

from derive import Op

OP = Op(
    name="kinks_in_a_sum",
    inputs=["x[N]"],
    definitions=["out[n] = relu(x[n])**1.5 + maximum(x[n], 0)**2.5"],
)
