"""Embedding lookup C[idx]; the derived backward scatters into dC, accumulating repeated indices."""

from derive import Op

OP = Op(
    name="embedding",
    doc="Rows of the table C picked by an integer tensor idx of any shape.",
    inputs=["idx[...]: int64", "C[V, E]"],
    definitions=["out[..., e] = C[idx[...], e]"],
)
