"""An embedding scaled by sqrt(C), as a transformer's is: its adjoint ``sqrt(C) * sum_n
delta(v, X[n]) grad_out[n, c]`` held the coefficient outside the sum, and the scatter (one
``index_add_``) matched only a sum: the backward was a (V, N) one-hot matrix times grad_out,
O(V N C) work and V N memory where the scatter is O(N C)."""

from derive import Op

OP = Op(
    name="scaled_embedding",
    doc="sqrt(C) E[X[n], c]: a token embedding scaled as in a transformer.",
    inputs=["E[V, C]", "X[N]: int64"],
    definitions=["y[n, c] = sqrt(C) * E[X[n], c]"],
)
