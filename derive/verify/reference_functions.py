"""The reference interpreter's own function table: each function of the op language as the
plainest torch that computes it, keyed by name.

The implementations are deliberately not read from :data:`derive.functions.FUNCTIONS`: the
reference must not share the code it is meant to judge, so that a wrong row cannot agree with
itself (``tests/unit/test_one_source.py`` holds the names of both to the same set). What the
registry states as a fact, not as code, is read from it: ``KINKED``, the functions not
differentiable at 0, where a check draws no input.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from derive.functions import FUNCTIONS


def _relu(x: torch.Tensor) -> torch.Tensor:
    # relu'(x) = 1[x > 0]: the mask is a constant, so autograd gives exactly 0 at x == 0
    return x * (x > 0).to(x.dtype)


def _softplus(x: torch.Tensor) -> torch.Tensor:
    # log(1 + e^x) = logaddexp(x, 0): exact everywhere (F.softplus switches to x above 20)
    return torch.logaddexp(x, torch.zeros_like(x))


# Functions of one argument, keyed by name: the name an op writes and the name of the SymPy class
# it parses to (abs -> Abs); the registry's own classes (sigmoid, ...) have the name an op writes.
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
_KINKED_ROWS = [f for f in FUNCTIONS.values() if f.kinked and f.arity == 1]
# not differentiable at 0, by both of a row's names; Heaviside (relu's derivative) is a SymPy
# class the reference evaluates beside the language's functions, not a row of the registry
KINKED = {f.name for f in _KINKED_ROWS} | {f.node.__name__ for f in _KINKED_ROWS if f.node}
KINKED |= {"Heaviside"}
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
