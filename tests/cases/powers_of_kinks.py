"""A fractional power of a kink (found by probing, 2026-11-25): the second order of
``relu(x)**1.5`` holds relu's step squared beside ``relu(x)**(-1/2)``; the square of the step
was no gate, so it was multiplied in, 0 * inf = nan at x <= 0 where torch's threshold backward
selects 0. A step's power is a step where a product is gated (lower.arithmetic._step_power).
Open: beside another such term (``+ maximum(x, 0)**2.5``) the product is fused into an
addcmul before it is gated, and the nan stays (docs/fuzzing.md)."""

from derive import Op

OP = Op(
    name="powers_of_kinks",
    inputs=["x[N]"],
    definitions=["out[n] = relu(x[n])**1.5"],
)
