"""Several entries picked from each row, ``tanh(logits[n, labels[n, o]])``: the adjoint
``sum_o delta(f, labels[n, o]) g[n, o]`` reads the row n in its index, which the one
``index_add_`` (an index over the summed o alone) could not take, so it went to the equality
masks, an (N, I, F) product summed over I; it is one ``scatter_add_`` of g at the labels."""

from derive import Op

OP = Op(
    name="several_picks_a_row",
    doc="tanh of I entries picked from each row of logits[N, F].",
    inputs=["logits[N, F]", "labels[N, I]: int64"],
    definitions=["y[n, o] = tanh(logits[n, labels[n, o]])"],
)
