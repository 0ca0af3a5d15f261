"""A param's arithmetic as torch's: inf and nan, never an exception.

Params are python numbers, and python raises where a tensor's arithmetic carries on:
``1 / beta`` at beta = 0 is ZeroDivisionError where ``1 / torch.tensor(0.)`` is inf,
``math.log(0)`` a ValueError where ``torch.log`` gives -inf, ``math.exp(1000)`` an
OverflowError; ``(-8.0) ** (1 / 3)`` is a complex number where ``torch.pow`` gives nan; and
``max(beta, nan)`` is beta (python keeps the first of two that do not compare) where
``torch.maximum`` gives nan.
A formula may hold such a value where it is never read: smooth L1 is
``where(|d| < beta, d**2 / (2 beta), |d| - beta / 2)``, the L1 loss at beta = 0 (torch's
``smooth_l1_loss(beta=0)``), and a guard ``where(beta > 0, ..., |d|)`` selects around the
quotient but python evaluates it first. So each computation on a param that python may refuse
calls a module helper that checks its argument first (``_div``, ``_pow``, ``_math``; a
maximum or minimum of python numbers is always ``_max`` or ``_min``): the
same number wherever python has one, torch's inf or nan where it has none. Checked, not
caught: under ``torch.compile(dynamic=True)`` a param is a symbolic float, and an exception
while Dynamo traces the arithmetic is Dynamo's error, never the helper's to catch. A whole
power is wrapped too (``1e200 ** 2`` overflows, ``2 ** 2000`` of an int param is an int no
tensor takes). Sizes are not wrapped: they are checked positive before they divide.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from derive.ir import nodes as ir
from derive.ir.rewrite import rebuilt

DIV, POW, MATH = "_div", "_pow", "_math"  # the module's helpers (op_module.py.jinja)
EXTREMES = ("_max", "_min")  # maximum's and minimum's python forms (derive.functions)
_MATH_CALL = re.compile(r"math\.(\w+)\(\{0\}\)")


def ieee_scalars(block: list[ir.Statement], params: Collection[str]) -> list[ir.Statement]:
    """``block`` with each division by a number that reads a param (``params``), and each power
    or math function of one that python may refuse, calling the module's helper for it (see
    the module docstring)."""
    params = frozenset(params)
    if not params:
        return block

    def rule(n: ir.Node) -> ir.Node:
        if not (n.scalar and ir.refs(n) & params):
            return n
        if isinstance(n, ir.Binary) and n.op == "/" and ir.refs(n.right) & params:
            return ir.Apply(DIV + "({0}, {1})", (n.left, n.right), axes=n.axes)
        if isinstance(n, ir.Binary) and n.op == "**":
            return ir.Apply(POW + "({0}, {1})", (n.left, n.right), axes=n.axes)
        called = _MATH_CALL.fullmatch(n.form) if isinstance(n, ir.Apply) else None
        if called is not None:  # any: which raise where is the helper's to know, once
            return ir.Apply(f'{MATH}("{called[1]}", {{0}})', n.args, axes=n.axes)
        return n

    return [rebuilt(s, rule) for s in block]


def helpers_called(node: ir.Node) -> set[str]:
    """The helpers of this module ``node`` calls (itself, not its children)."""
    if isinstance(node, ir.Apply):
        return {h for h in (DIV, POW, MATH, *EXTREMES) if node.form.startswith(h + "(")}
    return set()
