"""A residual beside half a matrix product: ``x + 0.5 * (x @ W)``. Its forward and backward add
a scaled matrix product, which torch.add's alpha would carry in one kernel; Inductor's pattern
that turns an add of a matmul into an addmm drops that alpha (pytorch issues 167313, 196577),
so under torch.compile the module adds the product written out (found by probing: compiled,
the forward was 2.6 off and dx 1.0; tests/modules/test_torch_func.py)."""

from derive import Op

OP = Op(
    name="scaled_residual",
    inputs=["x[N, M]", "W[M, M]"],
    definitions=["out[n, m] = x[n, m] + 0.5 * Sum(x[n, k] * W[k, m], k)"],
)
