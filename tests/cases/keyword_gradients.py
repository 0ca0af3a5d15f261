"""Tensors whose gradients' names would be Python keywords: the gradient of ``el`` is not
``del``, nor that of ``ef`` ``def`` (``del = ...`` is code that does not parse; found trying a
GAT layer, whose attention logits of the edges' sources were named ``el``)."""

from derive import Op

OP = Op(
    name="keyword_gradients",
    inputs=["el[N, C]", "ef[C]"],
    definitions=[
        "h[n, c] = tanh(el[n, c] * ef[c])",
        "out[n] = Sum(h[n, c] * el[n, c], c)",
    ],
)
