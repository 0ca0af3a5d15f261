"""The simplifier's cost model, computed once per distinct sub-expression.

    cost(e) = 10 * (Sums in e) + count_ops(e)

Sums are full passes over a tensor, so they weigh most; then the arithmetic, counted exactly as
``sympy.count_ops`` counts it (``a - b`` is one SUB, ``x/y`` one DIV, ``-x`` one NEG). SymPy's
count_ops walks the expression as a tree and rebuilds every product as numerator/denominator
on each call; an adjoint of a long chain is a DAG whose tree is much larger, and the simplifier
asks for the cost of many candidates that share most of it. count_ops works through a stack
where each item's count depends on that item alone, so the count is a sum over items and can
be memoised per item: :func:`_count_ops` below is that loop body, branch for branch.
"""

from __future__ import annotations

import functools

import sympy as sp
from sympy.core.function import _coeff_isneg
from sympy.core.operations import LatticeOp
from sympy.simplify.radsimp import fraction

CACHE = 1 << 16


@functools.lru_cache(maxsize=CACHE)
def cost(expr: sp.Expr) -> int:
    """Sums are full passes over a tensor; count them heavily, then the arithmetic."""
    expr = sp.sympify(expr)
    if not isinstance(expr, sp.Expr) or expr.is_Relational:
        return 10 * _sums(expr) + int(sp.count_ops(expr))
    return 10 * _sums(expr) + _count_ops(expr)


@functools.lru_cache(maxsize=CACHE)
def _sums(e: sp.Basic) -> int:
    # the Sum nodes of e's tree (preorder_traversal), a shared subtree counted per occurrence
    return int(isinstance(e, sp.Sum)) + sum(_sums(a) for a in e.args)


@functools.lru_cache(maxsize=CACHE)
def _count_ops(a: sp.Basic) -> int:
    """``int(count_ops(a))``: one item of count_ops's stack, plus the items it pushes."""
    if a.is_Rational:
        return int(bool(a.p < 0)) + int(a.q != 1) if a is not sp.S.One else 0
    ops = 0
    if a.is_Mul:
        if _coeff_isneg(a):  # -x: NEG
            ops += 1
            a = a.as_two_terms()[1] if a.args[0] is sp.S.NegativeOne else -a
        n, d = fraction(a)
        if n.is_Integer:  # k/d: DIV (and NEG when k < 0)
            return ops + 1 + int(bool(n < 0)) + _count_ops(d)
        if d is not sp.S.One:  # n/d: DIV
            return ops + 1 + (0 if d.is_Integer else _count_ops(d)) + _count_ops(n)
    elif a.is_Add:
        return _count_add(a)
    if a.is_Pow and a.exp is sp.S.NegativeOne:  # 1/x: DIV
        return ops + 1 + _count_ops(a.base)
    if a == sp.S.Exp1:
        return ops + 1
    if a.is_Pow and a.base == sp.S.Exp1:
        return ops + 1 + _count_ops(a.exp)
    if a.is_Mul or isinstance(a, LatticeOp):  # k factors: k - 1 MUL
        ops += len(a.args) - 1
    elif a.args and (
        a.is_Pow or a.is_Function or isinstance(a, (sp.Derivative, sp.Integral, sp.Sum))
    ):
        ops += 1
    if not a.is_Symbol:
        ops += sum(_count_ops(x) for x in a.args)
    return ops


def _count_add(a: sp.Add) -> int:
    # k terms: k - 1 ADD/SUB; all negative: one NEG more (-x - y); a negative term counts as -it
    terms = a.args
    negative = [_coeff_isneg(t) for t in terms]
    ops = len(terms) - 1 + int(all(negative))
    return ops + sum(_count_ops(-t if neg else t) for t, neg in zip(terms, negative, strict=True))
