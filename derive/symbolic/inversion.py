"""Index inversion: the Sum rules that eliminate a delta of an affine subscript.

The adjoint of an affine read ``x[.., S*t + D*k - P]`` at ``x[.., u]`` is the delta
``delta(u, S*t + D*k - P)`` under the sums over t and k. Where one summed index has the
coefficient +-1 the delta is solved for it (t = u - D*k + P when S = 1), and the sum over t
becomes a read at the solved index, kept where that index is in t's range: a gather over the
inverted index. Where none has (a stride S > 1 and D > 1), the delta stays: the lowering
scatters (adds each term at its position). Nothing here knows a convolution: the rules hold for
any op with affine subscripts, and for no other delta (a plain ``delta(k, e)`` is
:func:`derive.symbolic.simplify._delta_eliminate`'s, unchanged).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import sympy as sp

from derive.functions import clamp, where
from derive.symbolic.indices import factors as _factors
from derive.symbolic.indices import substitute_apart, without


def solve_for(delta: sp.KroneckerDelta, k: sp.Symbol) -> sp.Expr | None:
    """``e`` with delta(a, b) = delta(k, e) (a - b = +-(k - e)), when a - b is affine with
    coefficient +-1 in k and one side is affine (not a plain index: the old rule's)."""
    a, b = delta.args
    if not any(_affine(x) for x in (a, b)):
        return None
    diff = sp.expand(a - b)
    c = diff.coeff(k)
    rest = sp.expand(diff - c * k)
    if c not in (1, -1) or rest.has(k):
        return None
    return -rest * c


def _affine(x: sp.Expr) -> bool:
    return not isinstance(x, (sp.Symbol, sp.Indexed)) and not x.is_Number and not x.has(sp.Indexed)


def in_range(
    value: sp.Expr,
    lo: sp.Expr,
    hi: sp.Expr,
    f: sp.Expr,
    at: Callable[[sp.Expr], sp.Expr] | None = None,
) -> sp.Expr:
    """f where lo <= value <= hi, else 0.

    As indicator factors ``where(c, 1, 0) f`` when f is a product of reads, numbers and sizes
    (finite everywhere: an affine read outside its tensor is 0), so sums can still factor;
    else as where(c, f, 0), which discards f there (1/y[u + 1] is 1/0 past the end). There,
    when ``at`` rebuilds f at another value (f = at(value)), f is read at
    ``clamp(value, lo, hi)``: a point of its range, finite where f is, equal to f wherever
    the where keeps it (:class:`derive.functions.clamp`).
    """
    conds = undecided_bounds(value, lo, hi)
    if sp.false in conds:
        return sp.S.Zero
    if _finite(f):
        return sp.Mul(*[where(c, 1, 0) for c in conds]) * f
    if at is not None and conds:
        f = at(clamp(value, lo, hi))
    for c in reversed(conds):
        f = where(c, f, 0)
    return f


def keep_padding(read: Callable[[tuple], sp.Expr], at: tuple, dims: tuple) -> sp.Expr:
    """A definition's body read at ``at`` (``read(at)``), kept to 0 where an affine subscript
    of ``at`` is outside its axis, as the read it replaces was: inlining dh[u + 1] = grad_out
    must not make it grad_out past the end (fuzz --affine seed 61). A body not finite
    everywhere is read at those subscripts clamped into their axes (:func:`in_range`)."""
    value = read(at)
    outside = [
        (pos, dim)
        for pos, (sub, dim) in enumerate(zip(at, dims, strict=True))
        if may_leave_axis(sub, dim)
    ]
    if outside and not _finite(value):
        held = {pos: clamp(at[pos], 0, dim - 1) for pos, dim in outside}
        value = read(tuple(held.get(pos, sub) for pos, sub in enumerate(at)))
    for pos, dim in outside:
        value = in_range(at[pos], 0, dim - 1, value)
    return value


def may_leave_axis(sub: sp.Expr, dim: sp.Expr) -> bool:
    """Whether the subscript ``sub`` may fall outside its axis [0, dim): an index alone runs
    over its own axis, so only an affine sum or product (y + 2, 2*u) can, where SymPy cannot
    decide 0 <= sub <= dim - 1. There a read is the tensor's zero padding."""
    return isinstance(sub, (sp.Add, sp.Mul)) and bool(undecided_bounds(sub, 0, dim - 1))


def undecided_bounds(value: sp.Expr, lo: sp.Expr, hi: sp.Expr) -> list:
    """lo <= value and value <= hi, those SymPy cannot decide true."""
    return [c for c in (sp.Ge(value, lo), sp.Le(value, hi)) if c is not sp.true]


def _finite(f: sp.Expr) -> bool:
    # a quotient or root of data may be 1/0 or sqrt(-x) past the end; of sizes it is not (a
    # size is checked positive); a function may be log(0) there
    if any(
        isinstance(p, sp.Pow) and not (p.exp.is_Integer and p.exp > 0) and p.base.has(sp.Indexed)
        for p in f.atoms(sp.Pow)
    ):
        return False
    # (an argmax's digits, floor(a/W) and Mod(a, W), are ints wherever a is: finite too)
    finite = (where, sp.KroneckerDelta, clamp, sp.floor, sp.Mod)
    return all(isinstance(w, finite) for w in f.atoms(sp.Function))


def _padded(f: sp.Expr, sol: sp.Expr, size: sp.Expr) -> bool:
    """Whether f is 0 wherever sol is outside [0, size): a factor of f reads an axis of that
    size at sol, and an affine read outside its tensor is 0 (f = x[.., sol, ..] h). Only for
    a finite f (:func:`_finite`): 0 / s[sol] past the end is 0 / 0 (fuzz --affine 260)."""
    return any(_reads_at(g, sol, size) for g in _factors(f))


def _reads_at(g: sp.Expr, sol: sp.Expr, size: sp.Expr) -> bool:
    """``g`` is 0 wherever sol is outside [0, size): a read of an axis of that size at sol,
    or a sum whose body is (its terms each 0 there, so their sum is): the second order of a
    convolution solves one delta with the other read still under a sum over kh, where an
    indicator kept the module from recognising the convolution."""
    if isinstance(g, sp.Indexed):
        return any(p == sol and d == size for p, d in zip(g.indices, g.base.shape or ()))
    if isinstance(g, sp.Sum) and not any(v in sol.free_symbols for v, *_ in g.limits):
        return _padded(g.function, sol, size)
    return False


def delta_invert(body: sp.Expr, lim, ctx) -> sp.Expr | None:
    # sum_k f(k) delta(u, c k + r) -> f((u - r)/c) 1[lo <= (u - r)/c <= hi]     (c = +-1)
    k, lo, hi = lim
    for f in _factors(body):
        if isinstance(f, sp.KroneckerDelta) and (sol := solve_for(f, k)) is not None:
            rest = sp.Mul(*without(_factors(body), f))
            return ctx.simplify(solved_in_range(rest, k, sol, lo, hi))
    return None


def solved_in_range(body: sp.Expr, k: sp.Symbol, sol: sp.Expr, lo: sp.Expr, hi: sp.Expr) -> sp.Expr:
    """``body``, the body of a sum over k in [lo, hi], at k = ``sol``, kept to 0 where
    ``sol`` is outside [lo, hi] (no k there to pick): ``1[lo <= sol <= hi] body(sol)``, the
    indicator dropped where a factor reads an axis of that size at sol (zero-padded there
    already, :func:`_padded`); a body not finite everywhere read at sol clamped into [lo, hi]
    (:func:`in_range`)."""
    rest = substitute_apart(body, k, sol)
    if lo == 0 and _finite(rest) and _padded(rest, sol, hi + 1):
        return rest
    return in_range(sol, lo, hi, rest, lambda v: substitute_apart(body, k, v))


def delta_through_sum(body: sp.Expr, lim, ctx, solvers: tuple = ()) -> sp.Expr | None:
    # sum_t f(t) sum_k g(k, t) delta(u, t + r(k)) -> sum_k f(u - r(k)) g(k, u - r(k)) 1[..]
    # (the inner sum cannot solve the delta for k, the outer one can for t: inverted there),
    # through any depth of nested sums: sum_t f(t) sum_i a(i) sum_v b delta(t, 2 i + v) ->
    # sum_i sum_v a b f(2 i + v) 1[..]. Left unsolved, the delta is lowered as an identity
    # over (t, 2 i + v) and every factor above it broadcast over both: the second order of
    # a strided window beside a gather asked for an N x G x J x F x N tensor (fuzz --windows
    # 15070, 43.8 GB at N = 324). Interchanging the sums needs their ranges free of t.
    # ``solvers`` are the other rules that solve a delta where it is a factor (the
    # simplifier's delta(t, e) with e an index or data: fuzz --windows 15002's second order).
    t = lim[0]
    if t not in delta_reads(body):  # every solver solves a delta that reads t
        return None
    for s in _factors(body):
        if not isinstance(s, sp.Sum):
            continue
        outside = sp.Mul(*without(_factors(body), s))
        if any(v in outside.free_symbols or v == t for v, *_ in s.limits):  # bound names clash
            continue
        if any(lo.has(t) or hi.has(t) for _, lo, hi in s.limits):  # not interchangeable
            continue
        inner = outside * s.function
        for solve in (delta_invert, *solvers):
            inverted = solve(inner, lim, ctx)
            if inverted is not None:
                return ctx.sum(inverted, tuple(s.limits))
        inverted = delta_through_sum(inner, lim, ctx, solvers)
        if inverted is not None:
            return ctx.sum(inverted, tuple(s.limits))
    return None


@functools.lru_cache(maxsize=1 << 16)
def delta_reads(e: sp.Basic) -> frozenset[sp.Symbol]:
    """The symbols the Kronecker deltas anywhere in ``e`` read, kept per node: where no delta
    reads t, no solver of :func:`delta_through_sum` can solve one at any depth of the nest,
    and interchanging the sums to look (a product built at each level) was work for nothing,
    done again for every sum above it (a tanh MLP's double backward: a nest per layer)."""
    if isinstance(e, sp.KroneckerDelta):
        return frozenset(e.free_symbols)
    if not e.args:
        return frozenset()
    return frozenset().union(*(delta_reads(a) for a in e.args))
