"""Functions of sums, of params and of tensors (found by the fuzzer, 2026-11-25, seed 1048132:
log1p(cosh(w) exp(g)), rewritten to a softplus of a sum). A function's code form fills its
argument into operators (sigmoid's python form ``0.5 * {0}``, softplus's ``-{0}``), and a sum
there read ``0.5 * a + b``: the printer parenthesises a slot that is an operand
(ir.printer._bare_slots)."""

from derive import Op

OP = Op(
    name="functions_of_sums",
    inputs=["x[N]", "y[N]"],
    params={"a": 1.0, "b": 2.0},
    definitions=[
        "out[n] = x[n] * sigmoid(a + b) + x[n] * softplus(a - b) + softplus(x[n] - y[n])"
        " + sigmoid(x[n] + y[n])"
    ],
)
