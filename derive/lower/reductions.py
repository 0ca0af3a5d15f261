"""Lowering of sums: a contraction of plain tensors becomes a matmul or one einsum, any other
Sum a ``.sum(dims)`` over the lowered body.

In: ``Sum(body, limits)`` and the lowerer; out: a :class:`~derive.lower.value.Value` naming a
temporary the lowerer binds once per distinct sum (alpha-equal sums share it).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy as sp

from derive.errors import DerivationError
from derive.lower.indexing import indexed
from derive.lower.value import ATOM, Scope, Value, matmul, memo_key, natural_order, plain

if TYPE_CHECKING:
    from derive.lower.lowerer import Lowerer


def _einsum_value(values: list[Value], out: tuple, order: list) -> Value:
    every = list(dict.fromkeys(list(order) + [a for v in values for a in v.axes]))
    letters = dict(zip(every, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", strict=False))
    spec = ",".join("".join(letters[x] for x in v.axes) for v in values)
    spec += "->" + "".join(letters[x] for x in out)
    return Value(f'torch.einsum("{spec}", {", ".join(v.code for v in values)})', out)


def sum_value(lw: Lowerer, e: sp.Sum, order: list[sp.Symbol], name: str | None = None) -> Value:
    key = memo_key(e)
    if key in lw.memo:
        return lw._permuted(lw.memo[key], order)
    bound = [lim[0] for lim in e.limits]
    lw.sizes.update({var: hi - lo + 1 for var, lo, hi in e.limits})
    inner = natural_order(e.function, order)
    order_in = list(dict.fromkeys(list(order) + inner))
    plan = plan_contraction(lw.scope(order_in), e.function, bound, order_in)
    if plan is not None:
        value = contract(lw, plan, order_in)
    else:
        body = lw.value(e.function, inner)
        missing = [b for b in bound if b not in body.axes]
        if missing:
            raise DerivationError(lw.op, f"sum over unused index {missing} in {e}")
        dims = ", ".join(str(body.axes.index(b)) for b in bound)
        code = f"{body.wrap(ATOM)}.sum({'(' + dims + ')' if len(bound) > 1 else dims})"
        value = Value(code, tuple(a for a in body.axes if a not in bound))
    name = name or lw._temp(e)
    lw.lines.append(f"{name} = {value.code}")
    lw.memo[key] = Value(name, value.axes)
    return lw._permuted(lw.memo[key], order)


@dataclass(frozen=True)
class Contraction:
    """A sum of a product that is one contraction: which factors meet over which axes."""

    factors: tuple[sp.Expr, ...]  # plain tensors, or sums (einsum operands)
    bound: tuple[sp.Symbol, ...]
    out: tuple[sp.Symbol, ...]  # the result's axes, in the order wanted
    matmul: bool  # two plain matrices that meet over one axis: ``a @ b``
    ranges: tuple[tuple[sp.Symbol, sp.Expr], ...] = ()  # the nested sums' indices taken in


def plan_contraction(scope: Scope, body: sp.Expr, bound: list, order: list) -> Contraction | None:
    """sum_k A[.., k] B[k, ..] -> A @ B (or an einsum), when body is two plain tensors;
    a product of three or more tensors (or reductions) -> pairwise contractions in a chosen
    order (:func:`pairwise`), never the broadcast product of all of them. Pure: decided on
    the factors' indices, nothing lowered."""
    coef, rest = body.as_coeff_Mul()
    factors = sp.Mul.make_args(rest)
    if coef != 1 or len(factors) < 2:
        return None
    einsum = len(factors) > 2 or any(isinstance(f, sp.Sum) for f in factors)
    if not all(plain(f) or (einsum and isinstance(f, sp.Sum)) for f in factors):
        return None  # element-wise work first: not a pure contraction
    if not all(scope.is_axis(i) for f in factors if plain(f) for i in f.indices):
        return None
    if einsum:
        factors, bound, ranges = _flattened(scope, factors, bound)
    axes = [tuple(dict.fromkeys(f.indices)) if plain(f) else scope.axes(f) for f in factors]
    every = {a for ax in axes for a in ax}
    if einsum and not set(bound) <= every:
        return None
    if not einsum:
        shared = set(axes[0]) & set(axes[1])
        if not set(bound) <= shared or not (set(axes[0]) - shared) or not (set(axes[1]) - shared):
            return None
    out = tuple(x for x in order if x in every - set(bound))
    mm = not einsum and matmul(Value("a", axes[0]), Value("b", axes[1]), bound, out) is not None
    return Contraction(factors, tuple(bound), out, mm, ranges if einsum else ())


def contract(lw: Lowerer, plan: Contraction, order: list) -> Value:
    """The planned contraction as ``a @ b``, or pair by pair (:func:`pairwise`)."""
    lw.sizes.update(dict(plan.ranges))
    values = [
        indexed(lw, f, list(f.indices)) if plain(f) else lw.value(f, order) for f in plan.factors
    ]
    if plan.matmul:
        return matmul(values[0], values[1], list(plan.bound), plan.out)
    return pairwise(values, plan.out, order)


def _flattened(scope: Scope, factors: tuple, bound: list) -> tuple[tuple, list, tuple]:
    """sum_i g[i] sum_j A[i,j] B[j,k] -> sum_{i,j} g[i] A[i,j] B[j,k]: one contraction, so
    :func:`pairwise` may contract g A first (I J + J K) instead of the simplifier's nesting
    (A B first: I J K). A nested sum already computed (shared with another gradient) stays."""
    flat, bound, ranges = [], list(bound), []
    for f in factors:
        inner = [lim[0] for lim in f.limits] if isinstance(f, sp.Sum) else []
        parts = sp.Mul.make_args(f.function) if inner else ()
        others = set().union(*(g.free_symbols for g in factors if g is not f))
        if (
            inner
            and memo_key(f) not in scope.computed
            and all(plain(p) and all(scope.is_axis(i) for i in p.indices) for p in parts)
            and not set(inner) & (others | set(bound))
        ):
            ranges += [(var, hi - lo + 1) for var, lo, hi in f.limits]
            flat.extend(parts)
            bound.extend(inner)
        else:
            flat.append(f)
    return tuple(flat), bound, tuple(ranges)


def pairwise(values: list[Value], out: tuple, order: list) -> Value:
    """Contract two operands at a time, the pair whose result has the fewest axes first.

    torch.einsum contracts its operands left to right, so ``A[i,j] B[j,k] v[k]`` would build
    the I x K product A B before touching v; contracting B v first costs J K + I J instead of
    I J K. Sizes are symbols here, so the rank of an intermediate is the size we can see: the
    pair leaving the fewest axes (those another operand or the output still needs) goes first,
    ties to the earliest pair. A plan that is left to right anyway stays one einsum (torch runs
    it in that order), unless every step is a matmul (``a @ b @ c`` reads better).
    """
    first = list(values)
    order = list(dict.fromkeys(list(order) + [a for v in first for a in v.axes]))
    values, in_order, all_matmul = list(first), True, True
    while len(values) > 1:
        i, j, axes = _cheapest_pair(values, out) if len(values) > 2 else (0, 1, out)
        pair = _contract(values[i], values[j], tuple(x for x in order if x in axes), order)
        in_order &= (i, j) == (0, 1)
        all_matmul &= pair.operands is not None
        values = [pair if k == i else v for k, v in enumerate(values) if k != j]
    if in_order and not all_matmul:
        return _einsum_value(first, out, order)
    return values[0]


def _cheapest_pair(values: list[Value], out: tuple) -> tuple[int, int, list]:
    candidates = []
    for i, j in itertools.combinations(range(len(values)), 2):
        needed = set(out).union(*(v.axes for k, v in enumerate(values) if k not in (i, j)))
        axes = [a for a in dict.fromkeys(values[i].axes + values[j].axes) if a in needed]
        candidates.append((len(axes), i, j, axes))
    return min(candidates, key=lambda c: c[:3])[1:]


def _contract(a: Value, b: Value, out: tuple, order: list) -> Value:
    bound = [x for x in dict.fromkeys(a.axes + b.axes) if x not in out]
    mm = matmul(a, b, bound, out) if set(bound) <= set(a.axes) & set(b.axes) else None
    return mm if mm is not None else _einsum_value([a, b], out, order)
