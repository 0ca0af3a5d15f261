"""A view written with the product a derived size names: ``view(x, N, A*B)`` beside
``sizes={"F": "A*B"}`` and ``W[F, H]``. Its index f runs over one size; it was refused as
running over two, A*B and F (found by probing)."""

from derive import Op

OP = Op(
    name="view_to_a_named_size",
    doc="x.flatten(1) @ W.",
    inputs=["x[N, A, B]", "W[F, H]"],
    sizes={"F": "A*B"},
    definitions=["xv = view(x, N, A*B)", "out[n, h] = Sum(xv[n, f] * W[f, h], f)"],
)
