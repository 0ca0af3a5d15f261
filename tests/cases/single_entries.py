"""Entries read at constants only (``W[1, 2]``, ``b[1, t[0]]``, ``x[n, t[1]]``): a float
entry is a 0-d tensor, an int one a data subscript; the stepwise adjoint of a read of one entry
is a stack of 0-d tensors (fuzz seed 91069: a raw IndexException, then ``torch.zeros(, ...)``)."""

from derive import Op

OP = Op(
    name="single_entries",
    doc="Entries of W and b read at constant subscripts, one through an int entry.",
    inputs=["x[N, 3]", "W[2, 3]", "b[2, B]", "t[2]: int64"],
    definitions=[
        "h[n] = x[n, 0] * W[1, 2] + exp(W[0, 0])",
        "out[n] = b[1, t[0]] * h[n] + x[n, t[1]]",
    ],
    stepwise=True,
)
