"""Case analysis on a where() condition: a product that is 0 where ``c`` holds and 0 where it
fails is 0.

Reverse mode writes the adjoints of ``where(c, a, b)`` as the masks ``where(c, 1, 0)`` and
``where(c, 0, 1)``; a second order multiplies one by the other, and nothing in SymPy knows that

    where(c, 0, 1) * where(c, 1, 0) * f = 0        (at every point one of the masks is 0)

Left in place, the lowering dropped such a term (rightly: it is 0) and its lost-axis check then
took the index only that term carried for a lost one, an engine bug where there was none (fuzz
--windows 9820). Other masks are decided too where ``c`` settles their conditions: ``p >= 3``
holding makes ``p <= 1`` fail, so ``where(p >= 3, a, 0) * where(p <= 1, b, 0)`` is 0 as well.

Each case is evaluated by SymPy, whose ``0 * oo`` is nan: a product that holds an infinity in a
case (a -inf branch, a quotient by a branch that is 0 there) is never called 0.
"""

from __future__ import annotations

import functools

import sympy as sp

from derive.functions import decided, where

_NEGATED = {sp.Ge: sp.Lt, sp.Gt: sp.Le, sp.Le: sp.Gt, sp.Lt: sp.Ge, sp.Eq: sp.Ne, sp.Ne: sp.Eq}
_MIRRORED = {sp.Ge: sp.Le, sp.Gt: sp.Lt, sp.Le: sp.Ge, sp.Lt: sp.Gt, sp.Eq: sp.Eq, sp.Ne: sp.Ne}


DEPTH = 3  # conditions split in turn: each level at most doubles the cases tried


def zero_by_cases(e: sp.Mul, depth: int = DEPTH) -> sp.Expr:
    """0 when, for the condition ``c`` of one of ``e``'s where() factors, ``e`` is 0 with ``c``
    taken true and 0 with ``c`` taken false; else ``e``. Tried only where two factors are
    where()s: one mask alone is 0 in one case at most.

    A case that is not 0 outright is split again on its own conditions, ``depth`` levels deep:
    masks nested in masks, ``where(c, 0, where(d, 0, 1)) * where(c, 0, where(d, 1, 0))``, are 0
    where c holds and, where it fails, 0 whether d holds or not (fuzz 700637)."""
    conds = [f.args[0] for f in e.args if isinstance(f, where)]
    if len(conds) < 2:
        return e
    for c in dict.fromkeys(conds):
        if all(_zero(_case(e, c, value), depth - 1) for value in (True, False)):
            return sp.S.Zero
    return e


def gate_divided(e: sp.Mul) -> sp.Expr:
    """``where(c, a, 0) / B**k`` -> ``where(c, a / B**k, 0)`` where B is a factor of a: a gate
    selects, so a divisor that cancels in the branch it keeps goes inside it.

    The chain rule writes an adjoint gated by where() times the local derivative of what the
    gated branch read: ``where(x > 0, x log(x), 0)`` reads ``log(x)``, whose derivative is
    ``1 / x``, so its backward holds ``where(x > 0, x, 0) / x``. That is ``where(x > 0, 1, 0)``
    wherever x is not 0, and 0 / 0 at x = 0, where the branch is not taken: the lowering's
    gate (``derive.lower.arithmetic._gated``) selects there, but a second order differentiates
    the quotient first, ``(where(c, 1, 0) - where(c, x, 0) / x) / x``, a difference of two
    masks SymPy cannot cancel over a divisor that is 0: NaN at x = 0 where the Hessian is 0
    (the second order of ``t (log t - log q)`` at a zero of the target t; found by probing).
    Equal wherever the divisor is not 0."""
    factors = list(e.args)
    for k, w in enumerate(factors):
        if not (isinstance(w, where) and w.args[2] == 0):
            continue
        c, a, _ = w.args
        bases = {
            f.base if isinstance(f, sp.Pow) else f
            for f in sp.Mul.make_args(a)
            if not isinstance(f, sp.Pow) or f.exp.is_positive
        }
        moved = [
            f
            for j, f in enumerate(factors)
            if j != k
            and isinstance(f, sp.Pow)
            and f.exp.is_Integer
            and f.exp < 0
            and f.base in bases
        ]
        if moved:
            rest = [f for j, f in enumerate(factors) if j != k and not any(f is m for m in moved)]
            return where(c, a * sp.Mul(*moved), 0) * sp.Mul(*rest)
    return e


def _zero(e: sp.Expr, depth: int) -> bool:
    if e == 0:
        return True
    return depth > 0 and isinstance(e, sp.Mul) and zero_by_cases(e, depth) == 0


def _case(e: sp.Expr, c: sp.Basic, value: bool) -> sp.Expr:
    """``e`` where ``c`` is ``value``: every where() condition that this settles, decided."""
    for d in dict.fromkeys(w.args[0] for w in e.atoms(where)):
        truth = value if d == c else implied(d, c, value)
        if truth is not None:
            e = decided(e, d, sp.true if truth else sp.false)
    return e


@functools.lru_cache(maxsize=4096)
def implied(d: sp.Basic, c: sp.Basic, value: bool) -> bool | None:
    """The truth of the comparison ``d`` wherever the comparison ``c`` is ``value``, or None when
    that does not settle it. Both are read as ``p op bound`` of one expression ``p`` and a number
    (``p`` an integer: a strict bound tightened by one): ``d`` holds where ``c``'s set of ``p``
    lies inside its own, fails where the two sets do not meet.

    Kept per (d, c, value), as :func:`_as_set` is per comparison: SymPy's sets with symbolic
    ends (``Interval(K - 1, oo)``) take milliseconds to build, nest and meet, and one
    simplification asks the same few conditions of every product it walks (fuzz --affine
    2104: 10,440 sets built from a handful of conditions, 55 of its 88 s)."""
    given, asked = _as_set(c, value), _as_set(d, True)
    if given is None or asked is None or given[0] != asked[0]:
        return None
    if given[1].is_subset(asked[1]):
        return True
    if given[1].intersect(asked[1]).is_empty:
        return False
    return None


@functools.lru_cache(maxsize=4096)
def _as_set(r: sp.Basic, value: bool) -> tuple[sp.Expr, sp.Set] | None:
    """``(p, S)``: ``r`` is ``value`` exactly where ``p`` lies in ``S`` (None: no comparison of
    an expression with a number)."""
    if type(r) not in _NEGATED:
        return None
    op = type(r) if value else _NEGATED[type(r)]
    const, p = sp.expand(r.lhs - r.rhs).as_coeff_Add()
    if p == 0:
        return None
    if p.could_extract_minus_sign():  # -p op -const: p mirrored op const
        p, const, op = -p, -const, _MIRRORED[op]
    return p, _points(op, -const, bool(p.is_integer))


def _points(op: type, bound: sp.Expr, integer: bool) -> sp.Set:
    """The values of p with ``p op bound``; for an integer p, closed at integer ends (p > 2.5 is
    p >= 3, p < 3 is p <= 2), so that sets of reals meet and nest as the integers in them do."""
    if integer:
        op, bound = _tightened(op, bound)
        if bound is None:  # p == 2.5 has no integer p; p != 2.5 has every one
            return sp.S.EmptySet if op is sp.Eq else sp.S.Reals
    return {
        sp.Ge: sp.Interval(bound, sp.oo),
        sp.Gt: sp.Interval.Lopen(bound, sp.oo),
        sp.Le: sp.Interval(-sp.oo, bound),
        sp.Lt: sp.Interval.Ropen(-sp.oo, bound),
        sp.Eq: sp.FiniteSet(bound),
        sp.Ne: sp.Union(sp.Interval.Ropen(-sp.oo, bound), sp.Interval.Lopen(bound, sp.oo)),
    }[op]


def _tightened(op: type, bound: sp.Expr) -> tuple[type, sp.Expr | None]:
    """``p op bound`` for an integer p, as a non-strict bound at an integer (p > b: p >= floor(b)
    + 1), or an equality at one; (op, None) for an (in)equality with no integer bound."""
    if op is sp.Gt:
        return sp.Ge, sp.floor(bound) + 1
    if op is sp.Lt:
        return sp.Le, sp.ceiling(bound) - 1
    if op is sp.Ge:
        return sp.Ge, sp.ceiling(bound)
    if op is sp.Le:
        return sp.Le, sp.floor(bound)
    return op, bound if bound.is_integer else None
