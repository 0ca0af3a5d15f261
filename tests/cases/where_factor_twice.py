"""A where() factor twice in one product of the second order, the product built unevaluated.

d/dZz of the first backward's ``(1 - tanh(u)**2) w`` with ``w = where(t2 < j, act2[j], 0)``
is ``-2 tanh(u) (1 - tanh(u)**2) w w``: the simplifier's product held w twice (not as
``w**2``), and the lowering's gate rule took "every factor but the gate" by identity,
dropping both copies: d2/dZz off by 84% relative, without a word (fuzz 991108, shrunk by
hand). Every "all factors but this one" in the engine now drops one occurrence
(``indices.without``)."""

from derive import Op

OP = Op(
    name="where_factor_twice",
    inputs=["y[R]", "hid[R]", "Zz[R]"],
    definitions=[
        "act2[s] = y[s] / Sum(hid[u], u)",
        "res[t2, j] = tanh(where(t2 < j, act2[j] * Zz[t2], act2[j]))",
    ],
)
