"""The reference interpreter's own function table: each function of the op language as the
plainest torch that computes it, keyed by name.

Deliberately not read from :data:`derive.functions.FUNCTIONS`: the reference must not share
the registry it is meant to judge. ``KINKED`` names the functions not differentiable at 0
(a check draws no input there).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _relu(x: torch.Tensor) -> torch.Tensor:
    # relu'(x) = 1[x > 0]: the mask is a constant, so autograd gives exactly 0 at x == 0
    return x * (x > 0).to(x.dtype)


def _softplus(x: torch.Tensor) -> torch.Tensor:
    # log(1 + e^x) = logaddexp(x, 0): exact everywhere (F.softplus switches to x above 20)
    return torch.logaddexp(x, torch.zeros_like(x))


# Functions of one argument, keyed by name: SymPy's classes and the registry's own (sigmoid, ...)
# share one name space, so the reference does not import the registry it is meant to judge.
UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "exp": torch.exp,
    "log": torch.log,
    "tanh": torch.tanh,
    "sin": torch.sin,
    "cos": torch.cos,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "Abs": torch.abs,
    "abs": torch.abs,
    "sign": torch.sign,
    "sqrt": torch.sqrt,
    "sigmoid": torch.sigmoid,
    "softplus": _softplus,
    "relu": _relu,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "erf": torch.special.erf,
    "Heaviside": lambda x: (x > 0).to(x.dtype),
}
KINKED = {"Abs", "abs", "sign", "relu", "Heaviside"}  # not differentiable at 0
# Element-wise extremes of two or more expressions (sympy.Max / sympy.Min, not the reduction)
VARIADIC: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "Max": torch.maximum,
    "Min": torch.minimum,
}

# where(c, a, b)'s condition: a comparison of indices or int data, by name (no registry import)
COMPARE: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "Equality": torch.eq,
    "Unequality": torch.ne,
    "LessThan": torch.le,
    "StrictLessThan": torch.lt,
    "GreaterThan": torch.ge,
    "StrictGreaterThan": torch.gt,
}
