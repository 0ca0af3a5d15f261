"""Input and output embeddings tied, as GPT-2's are: ``E`` looked up by the tokens and used
again as the output projection. dE is the projection's ``g^T h`` plus the lookup's scatter
``sum_n delta(v, X[n]) dh[n, c]``; the scatter, a term beside another rather than a whole
assignment, went to the equality masks, a (V, C, N) product (316G entries at GPT-2's V, C
and 8k tokens). It is one ``index_add_`` into a name of its own."""

from derive import Op

OP = Op(
    name="tied_embedding",
    doc="logits = tanh(E[X]) @ E^T: an embedding tied to the output projection.",
    inputs=["E[V, C]", "X[N]: int64"],
    definitions=[
        "h[n, c] = tanh(E[X[n], c])",
        "logits[n, v] = Sum(h[n, c] * E[v, c], c)",
    ],
)
