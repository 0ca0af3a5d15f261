"""Identity rows decline what only looks like their pattern; registry functions know their sign."""

from __future__ import annotations

import sympy as sp

from derive.functions import sigmoid, softplus
from derive.identities import DEFINITION_RULES, rewrite

w = sp.Symbol("w", real=True)


def test_sigmoid_ratio_does_not_divide_a_sigmoid_in() -> None:
    # 2 e^-w matches r e^x sigma(-x) with x = -w, r = 2 / sigma(w): no sigmoid ratio there
    assert rewrite(2 * sp.exp(-w), DEFINITION_RULES) == 2 * sp.exp(-w)
    # r e^x sigma(-x) -> r sigma(x) still fires where it is one
    assert rewrite(3 * sp.exp(w) * sigmoid(-w), DEFINITION_RULES) == 3 * sigmoid(w)


def test_sigmoid_and_softplus_are_positive_on_reals() -> None:
    assert sigmoid(w).is_positive and softplus(w).is_positive
    assert (1 / sigmoid(w)).is_extended_real  # so sign(.. / sigmoid(w)) differentiates
    assert sigmoid(sp.Symbol("z")).is_positive is None  # complex z: unknown
