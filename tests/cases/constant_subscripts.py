"""Three blocks of one input read by constant subscripts through a view (issue 13's q, k, v):
the adjoint is the three blocks' gradients stacked back, one of them zero."""

from derive import Op

OP = Op(
    name="constant_subscripts",
    doc="out = y[:, 1] * y[:, 2] of y = view(x, N, 3, M); block 0 unused.",
    inputs=["x[N, 3*M]"],
    definitions=["y = view(x, N, 3, M)", "out[n, m] = y[n, 1, m] * y[n, 2, m]"],
)
