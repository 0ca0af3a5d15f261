"""A residual sum beside a transpose (found by probing, 2026-11-25): the backward returns
grad_out itself for x and a view of it for y, and autograd handed each leaf's .grad the tensor
it got, so x.grad, y.grad and the caller's grad_out shared memory (module's _distinct)."""

from derive import Op

OP = Op(
    name="residual_and_transpose",
    inputs=["x[N, M]", "y[M, N]", "z[N, M]"],
    definitions=["out[n, m] = x[n, m] + y[m, n] + z[n, m]"],
)
