"""Log-cosh written with its exps, ``log((e^d + e^-d) / 2)``. The exp ratio of its gradient
became a sigmoid that left ``e^d`` beside the forward's ``e^-d``, a product Mul keeps apart:
``inf * 0`` at |d| > 709 (float64) or 88 (float32), a NaN gradient where the loss is finite.
The collapse merges a product's exps where one goes whole (``simplify.exps_merged``; found
by probing)."""

from derive import Op

OP = Op(
    name="log_cosh_written_with_exps",
    doc="log(cosh(x - y)) written with exps, per entry.",
    inputs=["x[N]", "y[N]"],
    definitions=["out[n] = log((exp(x[n] - y[n]) + exp(y[n] - x[n])) / 2)"],
)
