"""Lowering of triangular sums (issue 25): a Sum over s of a body masked by a comparison of s
with a free index t over the same range is a running sum, one ``cumsum`` along s.

The rule, for A free of t, s and t both running over 0..T-1 (the mask written
``where(s <= t, A, 0)`` or ``where(s <= t, 1, 0) * A``)::

    sum_s [s <= t] A[.., s, ..] -> cumsum_s(A)[.., t, ..]
    sum_s [s <  t] A[.., s, ..] -> cumsum_s(A) - A                 (the running sum before t)
    sum_s [s >= t] A[.., s, ..] -> flip(cumsum_s(flip(A)))          (from the end: an adjoint)
    sum_s [s >  t] A[.., s, ..] -> flip(cumsum_s(flip(A))) - A

A cumulative sum's adjoint is the reversed one (``dx[s] = sum_t [s <= t] g[t]``), derived by
the engine; this rule only recognises the mask. O(T) per row where the generic lowering's
broadcast mask is O(T^2). Any other Sum (a mask against an affine expression, ranges that
differ, t read by A) keeps the generic lowering.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.functions import where
from derive.ir import nodes as ir
from derive.lower.context import Context
from derive.lower.value import Scope


@dataclass(frozen=True)
class Scan:
    """``sum_s mask(s, t) body``: a running sum of ``body`` along s, read at t."""

    body: sp.Expr
    summed: sp.Symbol  # s
    out: sp.Symbol  # t
    reverse: bool  # s >= t: from the end
    exclusive: bool  # s < t or s > t: the entry at t itself left out


def plan_scan(scope: Scope, e: sp.Sum) -> Scan | None:
    """The running sum ``e`` is, or None. Pure: reads the Sum and the index ranges."""
    if len(e.limits) != 1:
        return None
    s, lo, hi = e.limits[0]
    split = _masked(e.function)
    if split is None or lo != 0:
        return None
    rel, body = split
    for out, reverse in ((rel.gts, False), (rel.lts, True)):
        if (rel.lts, rel.gts) != ((s, out) if not reverse else (out, s)):
            continue
        if not scope.is_axis(out) or out == s or body.has(out) or not body.has(s):
            continue
        size = scope.sizes.get(out)
        if size is None or sp.expand(size - (hi + 1)) != 0:
            continue
        strict = isinstance(rel, (sp.StrictLessThan, sp.StrictGreaterThan))
        return Scan(body, s, out, reverse, strict)
    return None


def _masked(f: sp.Expr) -> tuple[sp.core.relational.Relational, sp.Expr] | None:
    """(the comparison, the body) of ``where(c, A, 0)`` or ``where(c, k, 0) * A``."""
    if isinstance(f, where) and f.args[2] == 0:
        return _relation(f.args[0], f.args[1])
    wheres = [a for a in sp.Mul.make_args(f) if isinstance(a, where)]
    if len(wheres) != 1 or wheres[0].args[2] != 0 or not wheres[0].args[1].is_number:
        return None
    (w,) = wheres
    return _relation(w.args[0], f / w * w.args[1])


def _relation(cond: sp.Basic, body: sp.Expr) -> tuple | None:
    kinds = (sp.LessThan, sp.StrictLessThan, sp.GreaterThan, sp.StrictGreaterThan)
    return (cond, body) if isinstance(cond, kinds) else None


def scan_value(cx: Context, plan: Scan, order: list[sp.Symbol]) -> ir.Node:
    """``body`` lowered with s where t is wanted, summed running along s, s named t."""
    inner = [plan.summed if a == plan.out else a for a in order]
    body = cx.value(plan.body, inner)
    dim = body.axes.index(plan.summed)
    axes = tuple(plan.out if a == plan.summed else a for a in body.axes)
    value: ir.Node = ir.Cumsum(body, dim, plan.reverse, axes=body.axes)
    if plan.exclusive:  # on s's axes: the body read twice is one node, computed once
        value = ir.Binary("-", value, body, axes=body.axes)
    return ir.relabel(value, axes)
