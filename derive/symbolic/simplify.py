"""The index-aware simplifier: rewrite rules for Sums, applied bottom-up by one small engine.

SymPy alone leaves ``Piecewise``/``KroneckerDelta`` debris in index sums (sympy issues 13993,
27359). Here indices are in range by construction, so deltas can be eliminated outright, and
the op's own definitions supply the identities that collapse whole chains. Each rule is one
entry of :data:`SUM_RULES`, its identity beside it; a rule returns ``None`` when it does not
apply. A rule that *rewrites* (rather than reduces) is accepted only when it lowers the cost.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import sympy as sp

from derive.functions import clamp, where
from derive.symbolic.cases import gate_divided, zero_by_cases
from derive.symbolic.cost import cost
from derive.symbolic.indices import (
    bound_indices,
    bound_shape,
    canonical_bound,
    substitute_apart,
    without,
)
from derive.symbolic.indices import factors as _factors
from derive.symbolic.inversion import delta_invert, delta_through_sum, solve_for, solved_in_range

Limit = tuple[sp.Symbol, sp.Expr, sp.Expr]


@dataclass(frozen=True)
class Reduction:
    """A definition ``name[I] = coef * Sum_k body``: lets ``Sum_k body`` fold back to it."""

    name: sp.IndexedBase | sp.Symbol
    indices: tuple[sp.Symbol, ...]
    coef: sp.Expr
    body: sp.Expr
    limit: Limit


# Distributing a product over sums multiplies their term counts: (a1 + b1)...(an + bn) has 2**n
# terms. A product is expanded only while that count stays under this bound, so a chain of n
# factors (1 - tanh(..)**2) is left as a product instead of taking 2**n work.
EXPAND_TERMS = 16
# A product is put over one denominator (cancel) while the powers of the distinct sums it
# divides by add up to at most this (:func:`_divisor_degree`)
CANCEL_DEGREE = 8


def expanded_terms(e: sp.Expr, limit: int = EXPAND_TERMS) -> int:
    """How many terms ``expand_mul(e)`` would have, counted without expanding (capped at limit+1).

    terms(a + b) = terms(a) + terms(b), terms(a b) = terms(a) terms(b), terms(leaf) = 1.
    """
    if isinstance(e, sp.Add):
        return min(sum(expanded_terms(a, limit) for a in e.args), limit + 1)
    if isinstance(e, sp.Mul):
        n = 1
        for a in e.args:
            n = min(n * expanded_terms(a, limit), limit + 1)
        return n
    return 1


def _sum_zero(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k 0 -> 0
    return sp.S.Zero if body == 0 else None


def _sum_of_add(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k (a + b) -> sum_k a + sum_k b
    if isinstance(body, sp.Add):
        return sp.Add(*[ctx.sum(t, (lim,)) for t in body.args])
    return None


def _delta_eliminate(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k f(k) * delta(k, e) -> f(e)                 (e an index or a data read: in k's range)
    # sum_k f(k) * delta(k, e) -> f(e) 1[lo <= e <= hi]  (e = 2 y + S, any other expression)
    # An index of k's axis or an entry of checked int data lies in k's range by construction,
    # so does a digit of an argmax (floor(a/M), Mod(a, M): derive.language.argmax); an affine
    # e may not (x[2 h + S] read past the end of x is zero padding, fuzz 9008).
    k, lo, hi = lim
    for f in _factors(body):
        if isinstance(f, sp.KroneckerDelta):
            a, b = f.args
            other = b if a == k else a if b == k else None
            if other is not None and not other.has(k):
                rest = sp.Mul(*without(_factors(body), f))
                if _in_range_by_construction(other):
                    return ctx.simplify(substitute_apart(rest, k, other))
                return ctx.simplify(solved_in_range(rest, k, other, lo, hi))
    return None


def _delta_through_sum(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_t f(t) sum_k g delta(u, t + r(k)) -> sum_k sum_t f g delta(..), and the same for a
    # delta(t, e) under any depth of sums: solved where it stands (inversion.delta_through_sum)
    return delta_through_sum(body, lim, ctx, solvers=(_delta_eliminate,))


def _unclamped_under_guard(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k where(lo <= a <= hi, f, 0) delta(u, clamp(a, lo, hi)) -> .. delta(u, a): where the
    # guard holds, the clamp is a, and elsewhere the product is 0 whatever the delta reads.
    # The first order reads a body at clamp(e, lo, hi) for range (solved_in_range); its second
    # order meets that clamp inside a delta no rule solves, a K-wide product per entry
    # (a shift x[n, t - 1]: an N x T x T temporary); unclamped, delta_invert solves it.
    out = unclamped_deltas(body)
    return None if out == body else ctx.sum(out, (lim,))


def unclamped_deltas(e: sp.Expr) -> sp.Expr:
    """``where(lo <= a <= hi, f, 0) X`` with every ``clamp(a, lo, hi)`` inside a delta of X
    read as ``a``: where the guard holds the clamp is a, and where it fails the product is 0
    whatever a delta reads (0 or 1, finite either way). Anywhere in X, under a sum or in one
    term of an Add (fuzz --windows 16500's second order: ``delta(a, clamp(a1 + off, ..) -
    off)`` in a term beside its guard, under sums over a1 and v2, was a six-axis scatter);
    nested clamps too, outermost first, as the guards name them. Reads keep their clamps: a
    tensor read past its end is no number."""
    factors = _factors(e)
    held = {c for f in factors for c in _guards(f)}
    if not held:
        return e

    def unclamp(x: sp.Expr) -> sp.Expr:
        if isinstance(x, clamp):
            a, lo, hi = x.args
            if (a >= lo) in held and (a <= hi) in held:
                return unclamp(a)
        if not x.args or not x.has(clamp):
            return x
        args = [unclamp(a) for a in x.args]
        return x.func(*args) if args != list(x.args) else x

    out = [
        f.replace(lambda d: isinstance(d, sp.KroneckerDelta) and d.has(clamp), unclamp)
        for f in factors
    ]
    return sp.Mul(*out) if out != factors else e


def _guards(f: sp.Expr) -> Iterator[sp.Expr]:
    """The conditions that hold wherever ``f`` is not 0: ``where(c, where(d, x, 0), 0)``'s c, d."""
    while isinstance(f, where) and f.args[2] == 0:
        yield f.args[0]
        f = f.args[1]


def _in_range_by_construction(e: sp.Expr) -> bool:
    """An index, an entry of int data, or a digit of one (``floor(a/M)``, ``Mod(a, M)``: the
    position of a Max over several indices, each digit in its index's range)."""
    if isinstance(e, (sp.Symbol, sp.Indexed)):
        return True
    if isinstance(e, sp.floor) and isinstance(e.args[0], sp.Mul):  # floor(a / (M1 M2))
        data = [f for f in e.args[0].args if f.has(sp.Indexed)]
        divisors = [f for f in e.args[0].args if f.is_Pow and f.exp.is_negative]
        return (
            len(data) == 1
            and len(data) + len(divisors) == len(e.args[0].args)
            and (_in_range_by_construction(data[0]))
        )
    return isinstance(e, sp.Mod) and _in_range_by_construction(e.args[0])


def _equal_reads(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k where(a == s[k], f, 0) g(s[k]) -> sum_k where(a == s[k], f(a), 0) g(a)   (a free of
    # k, s[k] an int read: where the guard fails the term is 0 whatever g reads, where it
    # holds s[k] is a). What read k only through s[k] then stands outside the sum: a segment
    # softmax's 1 / den[seg[n1]] beside where(seg[n] == seg[n1], ..) is 1 / den[seg[n]].
    k = lim[0]
    factors = _factors(body)
    for f in factors:
        sides = _equal_sides(f)
        if sides is None:
            continue
        for a, read in (sides, sides[::-1]):
            if not _read_elsewhere(read, a, lim):
                continue
            moved = _read_at(factors, f, read, a, k)
            if moved is not None:
                return ctx.sum(sp.Mul(*moved), (lim,))
    return None


def _read_at(
    factors: tuple[sp.Expr, ...] | list[sp.Expr], guard: sp.Expr, read: sp.Expr, a: sp.Expr, k
) -> list[sp.Expr] | None:
    """``factors`` with each one that reads ``k`` only through ``read`` read at ``a`` (the
    guard says they are equal), or None where none does. One that still reads k stays as
    written: exp(s[k] - mx[seg[k]]) is the forward's ex[k], which mx[a] would hide."""
    out, changed = [], False
    for g in factors:
        if g is not guard and g.has(read) and not bound_indices(g) & (a.free_symbols | {k}):
            h = g.xreplace({read: a})
            if not h.has(k):
                out.append(h)
                changed = True
                continue
        out.append(g)
    return out if changed else None


def _read_elsewhere(read: sp.Expr, a: sp.Expr, lim: Limit) -> bool:
    """``read`` is int data over k, ``a`` the same data at another index j (seg[n1], seg[n]),
    and the sum runs over the whole axis j subscripts: a factor read at ``a`` is one the sum
    reads at k = j, never a value it did not compute (1 / den[g] of an empty segment g would
    be 0 * inf outside the sum)."""
    k, lo, hi = lim
    if not (isinstance(read, sp.Indexed) and isinstance(a, sp.Indexed) and read.base == a.base):
        return False
    if not read.base.label.is_integer or a.has(k) or read.base.shape is None:
        return False
    at = [p for p, i in enumerate(read.indices) if i == k]
    if len(at) != 1 or not isinstance(a.indices[at[0]], sp.Symbol):
        return False
    whole = lo == 0 and sp.expand(hi + 1 - read.base.shape[at[0]]) == 0
    return whole and read.xreplace({k: a.indices[at[0]]}) == a


def _equal_sides(f: sp.Expr) -> tuple[sp.Expr, sp.Expr] | None:
    """(a, b) where the factor ``f`` is 0 unless a == b: ``where(a == b, x, 0)``, a delta."""
    if isinstance(f, where) and isinstance(f.args[0], sp.Eq) and f.args[2] == 0:
        return f.args[0].args
    return f.args if isinstance(f, sp.KroneckerDelta) else None


def _constant(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k c -> (hi - lo + 1) * c          when c does not depend on k
    k, lo, hi = lim
    return body * (hi - lo + 1) if not body.has(k) else None


def _factor_out(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k c * f(k) -> c * sum_k f(k)
    k = lim[0]
    outside = [f for f in _factors(body) if not f.has(k)]
    if not outside or len(outside) == len(_factors(body)):
        return None
    inside = [f for f in _factors(body) if f.has(k)]
    out = sp.Mul(*outside) * ctx.sum(sp.Mul(*inside), (lim,))
    return _merge_renamed_factors(out) if isinstance(out, sp.Mul) else out


def _common_deltas_out(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k (d a(k) + d b(k)) g(k) -> d sum_k (a(k) + b(k)) g(k)    (a delta d in every term,
    #     free of k: the sum over d's index then solves it; one of LAST_RULES)
    k = lim[0]
    factors = [f for g in _factors(body) for f in _common_pulled(g, k)]
    if len(factors) == len(_factors(body)):
        return None
    return _factor_out(sp.Mul(*factors), lim, ctx)


def _common_pulled(f: sp.Expr, k: sp.Symbol) -> list[sp.Expr]:
    """``f`` as factors, the Kronecker deltas free of ``k`` that every term of a sum has pulled
    out of it: ``d(a, b) x[k] - d(a, b) y[k]`` is ``[d(a, b), x[k] - y[k]]``, a delta the sum
    over ``a`` then solves, where it would sit in each term of an expression summed whole.
    Deltas only: another common factor pulled out leaves a sum the expansion no longer splits
    (batchnorm's double backward kept ``delta(n, n1) - 1/N`` whole: an N x N x M tensor)."""
    if not isinstance(f, sp.Add) or not f.has(k):
        return [f]
    terms = [list(sp.Mul.make_args(t)) for t in f.args]
    common = [c for c in terms[0] if isinstance(c, sp.KroneckerDelta) and not c.has(k)]
    common = [c for c in dict.fromkeys(common) if all(c in t for t in terms[1:])]
    if not common:
        return [f]
    for t in terms:
        for c in common:
            t.remove(c)
    return common + [sp.Add(*[sp.Mul(*t) for t in terms])]


def _guard_out(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k g(k) where(c, f(k), 0) -> where(c, sum_k g f, 0)     (c free of k: 0 = sum_k 0
    # where it fails). Inside, the sum meets what the guard held: a delta over k two sums
    # down (fuzz --affine 4142's second order: delta(q, 2 a + 2 u) under a sum over a under
    # where(k - 1 >= 0, ..), a mask over six axes), factors free of k that then stand outside
    # it (--windows 16528's: a window's indicator over j3 times a read free of j3, summed as
    # a five-axis product). Not where a delta over k stands beside the guard: it is solved
    # as it stands, by a scatter the guard outside would hide (--affine 4022's second order).
    k = lim[0]
    factors = _factors(body)
    for f in factors:
        if isinstance(f, where) and f.args[2] == 0 and not f.args[0].has(k) and f.has(k):
            value = f.args[1]
            while isinstance(value, where) and value.args[2] == 0:  # nested guards
                value = value.args[1]
            beside = without(factors, f) + _factors(value)
            if any(isinstance(g, sp.KroneckerDelta) and g.has(k) for g in beside):
                return None
            others = sp.Mul(*without(factors, f))
            return where(f.args[0], ctx.sum(others * f.args[1], (lim,)), 0)
    return None


def _fold_reduction(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k body(k) -> name[I] / coef      when name[I] = coef * sum_k body(k) is a definition
    for red in ctx.reductions:
        match = _match_reduction(red, body, lim)
        if match is not None:
            return match
    return None


def _fold_through_sum(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k f(k) sum_d g(d) h(k, d) -> sum_d g(d) name[..] / coef
    #     when name[I] = coef * sum_k f(k) h(k, d) is a definition (the sums interchanged: both
    #     run over fixed ranges, so the order is free; kept only where the inner one folds)
    k = lim[0]
    if not ctx.reductions:
        return None
    for s in _factors(body):
        if not isinstance(s, sp.Sum) or not s.function.has(k):
            continue
        bound = [v for v, *_ in s.limits]
        outside = without(_factors(body), s)
        if any(v == k or any(g.has(v) for g in outside) for v in bound):
            continue  # bound names clash
        if any(lo.has(k) or hi.has(k) for _, lo, hi in s.limits):
            continue
        inner = outside + list(_factors(s.function))
        folded = _fold_reduction(sp.Mul(*[g for g in inner if g.has(k)]), lim, ctx)
        if folded is not None:
            rest = sp.Mul(*[g for g in inner if not g.has(k)])
            return ctx.sum(ctx.simplify(rest * folded), tuple(s.limits))
    return None


def _expand_if_cheaper(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k f * (a + b) -> sum_k f*a + sum_k f*b     kept only if the pieces simplify further
    k = lim[0]
    if not any(isinstance(f, sp.Add) and f.has(k) for f in _factors(body)):
        return None
    if expanded_terms(body) > EXPAND_TERMS:
        return None
    terms = _distributed(body)
    if len(terms) < 2:
        return None
    candidate = sp.Add(*[ctx.sum(ctx.simplify(t), (lim,)) for t in terms])
    if isinstance(candidate, sp.Add):  # sum_k e g / S - (sum_j g e) / S: one term, cancelled
        candidate = _merge_renamed(candidate)
    return candidate if cost(candidate) < cost(sp.Sum(body, lim)) else None


def _delta_terms_apart(body: sp.Expr, lim: Limit, ctx: Simplifier) -> sp.Expr | None:
    # sum_k f(k) (d(k, e) a + b(k)) -> sum_k f d a + sum_k f b: the terms of a factor that hold
    # a delta over k summed apart, each alone, where _delta_eliminate solves them (every term
    # may hold one: a focal loss's second order). Kept whole, the sum is
    # lowered as written: the delta an identity matrix over (k, e), every term a K-wide
    # product per entry of e (layernorm's second order, dgain: an N x C x C temporary).
    # A sum over other indices whose product holds such a factor is split the same way first:
    # sum_k f sum_h (d(k, e) a + b) c -> sum_k f sum_h d a c + sum_k f sum_h b c (_held_apart).
    k = lim[0]
    factors = _factors(body)
    for i, f in enumerate(factors):
        parts = _held_apart(f, k)
        if parts:
            others = sp.Mul(*factors[:i], *factors[i + 1 :])
            return sp.Add(*[ctx.sum(others * p, (lim,)) for p in parts])
    return None


def _held_apart(f: sp.Expr, k: sp.Symbol) -> list[sp.Expr] | None:
    """``f`` as parts that add up to it, each term holding a delta over ``k`` alone: a sum's
    terms (those holding none together), through products and sums over other indices to
    any depth: ``sum_h (d(k, e) a + b) c`` is ``sum_h d a c + sum_h b c``. None where no term
    holds one. Summed whole, the deltas inside were masks over every axis of the outer sums
    (fuzz --affine 5041's second order: a seven-axis product; --windows 16500's: a delta in
    one term of a factor of one term, under sums over a1 and v2, a six-axis scatter)."""
    if isinstance(f, sp.Add):
        held, rest = [], []
        for t in f.args:
            if _holds_delta_over(t, k):
                held.append(t)
            elif sub := _held_apart(t, k):
                held.extend(sub)
            else:
                rest.append(t)
        return held + ([sp.Add(*rest)] if rest else []) if held else None
    if isinstance(f, sp.Mul):
        factors = list(f.args)
        for i, g in enumerate(factors):
            sub = _held_apart(g, k) if isinstance(g, (sp.Add, sp.Sum)) else None
            if sub:
                others = sp.Mul(*factors[:i], *factors[i + 1 :])
                return [others * p for p in sub]
        return None
    if isinstance(f, sp.Sum) and all(v != k for v, *_ in f.limits):
        sub = _held_apart(f.function, k)
        return [sp.Sum(p, *f.limits) for p in sub] if sub else None
    return None


def _holds_delta_over(t: sp.Expr, k: sp.Symbol) -> bool:
    """A factor of ``t`` is a delta that solves for ``k``, or a sum (not over k) whose body
    holds one: summed apart, :func:`delta_through_sum` solves it there (fuzz --affine 4022's
    second order: deltas over f2 and f3 under a sum over g2, in a difference of such sums
    times db_dgain[f2, g1, f3], were masks over seven axes). A delta against data read at k
    (``delta(h, t[k])``) counts too: summed alone, that term is a scatter, where among the
    others it was a mask over (k, h) (fuzz --affine 4016's diagonal pick), and so does an
    affine one delta_invert solves for k (``delta(b, k - S*j)``: --affine 4011, a shifted
    maximum's adjoint, a (B, B, B, B) product). So does a factor with such a term deeper, in
    an Add or under a sum over other indices (:func:`_held_apart` splits it)."""
    return any(
        _delta_over(g, k)
        or isinstance(g, sp.KroneckerDelta)
        and (
            any(isinstance(a, sp.Indexed) and a.has(k) for a in g.args)
            or solve_for(g, k) is not None
        )
        or isinstance(g, sp.Sum)
        and all(v != k for v, *_ in g.limits)
        and _holds_delta_over(g.function, k)
        or isinstance(g, (sp.Add, sp.Sum))
        and _held_apart(g, k) is not None
        for g in _factors(t)
    )


def _delta_over(f: sp.Expr, k: sp.Symbol) -> bool:
    """``f`` is a Kronecker delta that solves for ``k``: ``d(k, e)`` with e free of k."""
    return isinstance(f, sp.KroneckerDelta) and k in f.args and not all(a.has(k) for a in f.args)


def polynomial(e: sp.Expr, leaf: Callable[[sp.Expr], bool]) -> bool:
    """``e`` a sum and product (positive integer powers, sums over indices) of ``leaf``s: no
    function and no division above them. Computed whole or a part at a time, such an
    expression meets the same values: a step or a split of it moves no function's range."""
    if isinstance(e, (sp.Add, sp.Mul)):
        return all(polynomial(a, leaf) for a in e.args)
    if isinstance(e, sp.Pow) and e.exp.is_Integer and e.exp > 0:
        return polynomial(e.base, leaf)
    if isinstance(e, sp.Sum):
        return polynomial(e.function, leaf)
    return leaf(e)


def _distributed(body: sp.Expr) -> list[sp.Expr]:
    """The terms of ``body`` with its top-level sums multiplied out, every other factor as it
    stands: ``f / ((p + 1) S)`` keeps its denominator, where ``expand_mul`` writes it as
    ``p S + S`` and ``S`` no longer cancels."""
    terms = [sp.S.One]
    for f in _factors(body):
        parts = f.args if isinstance(f, sp.Add) else (f,)
        terms = [t * p for t in terms for p in parts]
    return terms


SUM_RULES: list[Callable[[sp.Expr, Limit, Simplifier], sp.Expr | None]] = [
    _sum_zero,  # sum_k 0 -> 0
    _sum_of_add,  # sum_k (a + b) -> sum_k a + sum_k b
    _delta_eliminate,  # sum_k f(k) delta(k, e) -> f(e)
    delta_invert,  # sum_t f(t) delta(u, t + r) -> f(u - r) 1[lo <= u - r <= hi]
    _delta_through_sum,  # sum_t f(t) sum_k g delta(u, t + r(k)) -> sum_k sum_t f g delta(..)
    _unclamped_under_guard,  # sum_k where(lo <= a <= hi, f, 0) delta(u, clamp(a, lo, hi))
    _equal_reads,  # sum_k where(a == s[k], f, 0) g(s[k]) -> sum_k where(..) g(a)
    _constant,  # sum_k c -> K c
    _factor_out,  # sum_k c f(k) -> c sum_k f(k)
    _guard_out,  # sum_k g where(c, f, 0) -> where(c, sum_k g f, 0)  (c free of k)
    _fold_reduction,  # sum_n x[n, m] -> N mu[m]  (from mu[m] = 1/N sum_n x[n, m])
    _fold_through_sum,  # sum_k f(k) sum_d g h(k, d) -> sum_d g mu[d] (sums interchanged)
    _delta_terms_apart,  # sum_k f (d(k, e) a + b) -> sum_k f d a + sum_k f b
    _expand_if_cheaper,  # sum_k f (a + b) -> sum_k f a + sum_k f b, if that simplifies
]
# tried only where no rule above fires for any limit of the sum: pulling a delta out first
# would stop the expansion that solves it with the sum's other index (batchnorm's second order)
LAST_RULES: list[Callable[[sp.Expr, Limit, Simplifier], sp.Expr | None]] = [
    _common_deltas_out,  # sum_k (d a + d b) -> d sum_k (a + b): a delta common to every term
]


def _match_reduction(red: Reduction, body: sp.Expr, lim: Limit) -> sp.Expr | None:
    k, lo, hi = lim
    if (lo, hi) != red.limit[1:]:
        return None
    if not _kinds(red.body) <= _kinds(body):  # a tensor or function the body lacks: no match
        return None
    pattern = red.body.xreplace({red.limit[0]: k})
    found = _matched(red, pattern, body, k)
    if found is None and body.has(sp.Eq, sp.KroneckerDelta):
        # under an equality guard, in one form: where(s[k] == a, 1, 0) * rest read at a
        found = _matched(red, _gated(pattern, k), _gated(body, k), k)
    return found


def _gated(e: sp.Expr, k: sp.Symbol) -> sp.Expr:
    """``where(c, f, 0) g`` as ``where(c, 1, 0) f g``, each equality with its side over k
    first, and what reads that side read at the other (:func:`_equal_reads`)."""
    factors: list[sp.Expr] = []
    for f in _factors(e):
        sides = _equal_sides(f)
        if sides is not None and any(s.has(sp.Indexed) for s in sides):  # data: no solving
            a, b = sides
            cond = sp.Eq(b, a, evaluate=False) if b.has(k) and not a.has(k) else sp.Eq(a, b)
            value = f.args[1] if isinstance(f, where) else sp.S.One
            factors += [where(cond, 1, 0), *_factors(value)]
        else:
            factors.append(f)
    for f in list(factors):
        if isinstance(f, where) and isinstance(f.args[0], sp.Eq) and f.args[1] == 1:
            read, a = f.args[0].args
            if isinstance(read, sp.Indexed) and read.has(k) and not a.has(k):
                factors = _read_at(factors, f, read, a, k) or factors
    return sp.Mul(*factors)


def _matched(red: Reduction, pattern: sp.Expr, body: sp.Expr, k: sp.Symbol) -> sp.Expr | None:
    wilds = {i: sp.Wild(f"w_{i}", exclude=[k]) for i in red.indices}
    found = body.match(pattern.xreplace(wilds)) if wilds else ({} if body == pattern else None)
    if found is None or any(w not in found for w in wilds.values()):
        return None
    at = tuple(found[wilds[i]] for i in red.indices)
    if pattern.xreplace(dict(zip(red.indices, at, strict=True))) != body:
        return None
    value = red.name[at] if at else red.name
    # the coefficient is read at the same indices (res[r, w] = S1[r, w] / S2[r, w]: at [a, b]
    # the sum folds to res[a, b] * S2[a, b], never to S2 at the definition's own names)
    return value / red.coef.xreplace(dict(zip(red.indices, at, strict=True)))


@functools.lru_cache(maxsize=4096)
def _kinds(e: sp.Expr) -> frozenset:
    """The tensors ``e`` reads and the kinds of call it makes: whatever a pattern holds, a
    body it matches holds too (a wild stands for an index expression, which only adds), so a
    pattern with one the body lacks cannot match it, and SymPy's ``match``, most of the time
    a large derivation takes, is not asked."""
    out: set = set()
    for node in sp.preorder_traversal(e):
        if isinstance(node, sp.Indexed):
            out.add(node.base.label)
        elif isinstance(node, sp.Function):
            out.add(type(node))
    return frozenset(out)


class Simplifier:
    """Applies :data:`SUM_RULES` to every Sum, bottom-up, and tidies products."""

    def __init__(
        self,
        reductions: list[Reduction] = (),
        masked: dict | None = None,
        whole_powers: bool = False,
    ) -> None:
        self.reductions = list(reductions)
        self.masked: dict[str, Masked] = masked or {}
        # cancel with the written powers of sums standing whole too (_cancelled): the
        # collapsed first order's, where a Student-t's square was multiplied out
        self.whole_powers = whole_powers
        self._memo: dict[sp.Basic, sp.Basic] = {}

    def simplify(self, expr: sp.Expr) -> sp.Expr:
        return self._walk(sp.sympify(expr))

    def sum(self, body: sp.Expr, limits: tuple[Limit, ...]) -> sp.Expr:
        """Simplify ``sum_limits body``; a rule fires for one limit, the rest stay outside.

        Where no rule fires for any limit and the body is a sum whole that holds a delta, its
        limits join these (the ranges are fixed: the order is free) and every rule is tried
        again over all of them: a delta over g1 under a sum over f2 that no rule could change
        stayed an identity matrix (fuzz --affine 4022). Only there: joined everywhere, the
        rules that pull factors out took other orders and a sum the backward computes
        already was not recognised (attention's dbq: its fwd+bwd 12% slower)."""
        for rules in (SUM_RULES, LAST_RULES):  # a last resort once every limit is tried
            for i, lim in enumerate(limits):
                for rule in rules:
                    out = rule(body, lim, self)
                    if out is not None:
                        return self.sum(out, limits[:i] + limits[i + 1 :])
        if limits and isinstance(body, sp.Sum) and body.function.has(sp.KroneckerDelta):
            inner = {v for v, *_ in body.limits}
            if not inner & {v for v, *_ in limits}:
                joined = self.sum(body.function, tuple(body.limits) + tuple(limits))
                if joined != sp.Sum(body.function, *body.limits, *limits):
                    return joined
        if limits and (swapped := self._delta_outermost(body, limits)) is not None:
            return swapped
        return sp.Sum(body, *limits) if limits else body

    def _delta_outermost(self, body: sp.Expr, limits: tuple[Limit, ...]) -> sp.Expr | None:
        """sum_j f(j) sum_a g(a, j) d(u, e(a)) -> sum_a d(u, e(a)) sum_j f(j) g(a, j), where no
        rule solved the delta (a stride: e = 2 a + c) and it is free of j: the sums interchanged
        (fixed ranges), the delta outermost, where the lowering scatters the inner sum's value
        along u. Kept inside, the sum over a was computed for every u and j, a mask over all
        their axes (fuzz --affine 4142's second order: a six-axis product, +2 degrees).
        Only where that delta is the only one, inside the inner sum and beside it: the sums
        interchanged hold no other, so nothing interchanges them back."""
        sums = [f for f in _factors(body) if isinstance(f, sp.Sum)]
        if len(sums) != 1:
            return None
        (nested,) = sums
        outer = {v for v, *_ in limits}
        inner = {v for v, *_ in nested.limits}
        deltas = [f for f in _factors(nested.function) if isinstance(f, sp.KroneckerDelta)]
        if len(deltas) != 1:
            return None
        delta, others = deltas[0], without(_factors(nested.function), deltas[0])
        free = delta.free_symbols
        if free & outer or not free & inner or free <= inner:
            return None  # reads j, or no a, or no target axis u
        outside = without(_factors(body), nested)
        if sp.Mul(*outside, *others).has(sp.KroneckerDelta):
            return None
        if inner & (outer | sp.Mul(*outside).free_symbols):
            return None  # bound names clash
        rest = sp.Mul(*outside, *others)
        return sp.Sum(delta * self.sum(rest, limits), *nested.limits)

    def _walk(self, e: sp.Expr) -> sp.Expr:
        if not isinstance(e, sp.Basic) or not e.args:
            return e
        if e not in self._memo:
            self._memo[e] = self._walk_node(e)
        return self._memo[e]

    def _walk_node(self, e: sp.Expr) -> sp.Expr:
        if isinstance(e, sp.Sum):
            return self.sum(self._walk(e.function), tuple(e.limits))
        args = [self._walk(a) for a in e.args]
        if any(new is not old for new, old in zip(args, e.args, strict=True)):
            e = e.func(*args)  # rebuilt only when an argument changed: sorting is not free
        if isinstance(e, sp.Add):
            e = _merge_renamed(e)
        if isinstance(e, sp.Mul):
            e = _merge_renamed_factors(e)
        if isinstance(e, sp.Mul):  # where(c, x, 0) / x -> where(c, 1, 0)
            e = gate_divided(e)
        if isinstance(e, sp.Mul):  # where(c, 0, 1) where(c, 1, 0) f -> 0: 0 whether c holds or not
            e = zero_by_cases(e)
        # where(lo <= a <= hi, f, 0) delta(u, clamp(a, lo, hi)) -> .. delta(u, a)
        if isinstance(e, sp.Mul):
            e = unclamped_deltas(e)
        if isinstance(e, sp.Mul):
            e = _cheapest(_drop_masks(e, self.masked), self._walk, self.whole_powers)
        return e


@dataclass(frozen=True)
class Masked:
    """``name[indices]`` is the number ``value`` wherever ``cond`` fails (found by
    :func:`masked_tensors`): scores = where(t2 <= t1, s, -inf) is -inf there, so are 0 there
    counts = exp(scores - maxes) and probs = counts / counts_sum."""

    indices: tuple[sp.Symbol, ...]
    cond: sp.Basic
    value: sp.Expr


def off_value(f: sp.Expr, cond: sp.Basic, masked: dict[str, Masked]) -> sp.Expr:
    """f where ``cond`` fails: where(cond, a, b) read as b, a masked tensor as its value."""
    off: dict[sp.Expr, sp.Expr] = {w: w.args[2] for w in f.atoms(where) if w.args[0] == cond}
    for ind in f.atoms(sp.Indexed):
        m = masked.get(ind.base.label.name)
        if m is not None and m.cond.xreplace(dict(zip(m.indices, ind.indices))) == cond:
            off[ind] = m.value
    return f.xreplace(off) if off else f


def masked_tensors(steps: list, graph_tensors: dict) -> dict[str, Masked]:
    """Which definitions are a constant off a where() condition, in forward order."""
    masked: dict[str, Masked] = {}
    for step in steps:
        body = getattr(step, "body", None)
        if body is None or isinstance(body, (sp.Sum,)):
            continue
        if (m := masked_off(step.indices, body, masked)) is not None:
            masked[step.name] = m
    return masked


def masked_off(indices: tuple, body: sp.Expr, masked: dict[str, Masked]) -> Masked | None:
    """``body`` (over ``indices``) as a :class:`Masked`: the number it is wherever one of its
    where() conditions, or a condition of a masked tensor it reads, fails; None if none."""
    # in sorted order: the first condition that makes body a number is the one recorded
    conds = [w.args[0] for w in sorted(body.atoms(where), key=sp.default_sort_key)]
    for ind in sorted(body.atoms(sp.Indexed), key=sp.default_sort_key):
        m = masked.get(ind.base.label.name)
        if m is not None:
            conds.append(m.cond.xreplace(dict(zip(m.indices, ind.indices))))
    for cond in dict.fromkeys(conds):
        if not cond.free_symbols <= set(indices):
            continue
        value = off_value(body, cond, masked)
        if value.is_number and value != body:
            return Masked(tuple(indices), cond, value)
    return None


def _drop_masks(e: sp.Mul, masked: dict[str, Masked]) -> sp.Expr:
    # where(c, a, 0) f g -> a f g  when f g is 0 wherever c fails (and a is a finite constant:
    # sizes and numbers), e.g. the causal mask beside probs: the masked entries are 0 already.
    # The whole rest must be 0 there, not one factor: exp(-inf) sinh(-inf) is 0 * -inf = nan,
    # which the mask kept out (SymPy's 0 * oo is nan, so such a product is never 0)
    factors = list(e.args)
    for k, w in enumerate(factors):
        if not (isinstance(w, where) and w.args[2] == 0 and not w.args[1].atoms(sp.Indexed)):
            continue
        rest = [f for j, f in enumerate(factors) if j != k]
        if w.args[1].is_finite and sp.Mul(*[off_value(f, w.args[0], masked) for f in rest]) == 0:
            factors[k] = w.args[1]
    return sp.Mul(*factors) if factors != list(e.args) else e


def _merge_renamed(e: sp.Add) -> sp.Expr:
    # sum_i f(i) - sum_j f(j) -> 0: terms equal up to the names of their bound indices are
    # written with one term's names, so SymPy's own Add combines (and cancels) them
    first: dict[sp.Expr, sp.Expr] = {}
    split = [t.as_coeff_Mul() if t.has(sp.Sum) else (None, t) for t in e.args]
    alike = _alike([rest for coef, rest in split if coef is not None])
    terms = []
    for coef, rest in split:
        if coef is None or id(rest) not in alike:
            terms.append(rest if coef is None else coef * rest)
            continue
        # the key renames bound indices apart from the free ones (no capture: sum_k g[k, y]
        # and sum_k g[y, k] must keep different keys)
        rest = first.setdefault(canonical_bound(rest, rest.free_symbols), rest)
        terms.append(coef * rest)
    return sp.Add(*terms)


def _alike(parts: list[sp.Expr]) -> set[int]:
    """The ids of ``parts`` whose :func:`bound_shape` another part shares: only these can be
    equal to another up to bound names, and only these are renamed to compare."""
    shapes = [bound_shape(p, frozenset(p.free_symbols)) for p in parts]
    seen = collections.Counter(shapes)
    return {id(p) for p, shape in zip(parts, shapes, strict=True) if seen[shape] > 1}


def _merge_renamed_factors(e: sp.Mul) -> sp.Expr:
    # sum_i f(i) / sum_j f(j) -> 1: factors whose bases are equal up to the names of their
    # bound indices are written with one base's names, so SymPy's own Mul combines the powers
    if sum(1 for f in e.args if isinstance(f.as_base_exp()[0], sp.Sum)) < 2:
        return e  # one sum or none: nothing to merge (and canonical_bound is not free)
    first: dict[sp.Expr, sp.Expr] = {}
    factors, changed = [], False
    alike = _alike([f.as_base_exp()[0] for f in e.args if isinstance(f.as_base_exp()[0], sp.Sum)])
    for f in e.args:
        base, power = f.as_base_exp()
        if isinstance(base, sp.Sum) and id(base) in alike:
            same = first.setdefault(canonical_bound(base, base.free_symbols), base)
            changed |= same is not base
            base = same
        factors.append(base**power)
    return sp.Mul(*factors) if changed else e


def _cancels(combined: sp.Expr, e: sp.Expr) -> bool:
    return len(combined.atoms(sp.Indexed, sp.Symbol)) < len(e.atoms(sp.Indexed, sp.Symbol))


def _cheapest(e: sp.Mul, walk: Callable[[sp.Expr], sp.Expr], whole_powers: bool = False) -> sp.Expr:
    # exp(a) exp(-a) -> 1 and f (a + b) -> f a + f b, whichever leaves the fewest operations
    best = _delta_substituted(e)
    combined = powsimp_exp(best)
    # only where something cancels: exp(a(k)) exp(b) kept apart lets sum_k pull exp(b) out
    if combined != e and cost(combined) < cost(best) and _cancels(combined, best):
        best = combined
    small = expanded_terms(best) <= EXPAND_TERMS
    if small and not best.has(sp.Sum) and 0 < _divisor_degree(best) <= CANCEL_DEGREE:
        # (1 - s)(y/s - (1 - y)/(1 - s)) s -> y - s: rational cancellation
        cancelled = _cancelled(best, whole_powers)
        if cost(cancelled) < cost(best):
            best = cancelled
    adds = any(isinstance(f, sp.Add) for f in _factors(best))
    if adds and expanded_terms(best) <= EXPAND_TERMS:
        expanded = expand_product(best)
        if isinstance(expanded, sp.Add):
            expanded = walk(sp.Add(*[powsimp_exp(t) for t in expanded.args]))
            if cost(expanded) < cost(best):
                best = expanded
    return best


def _divisor_degree(e: sp.Expr) -> sp.Expr:
    """The powers of the distinct sums ``e`` divides by, added up (``1 / (s (1 - s)**2)``: 2;
    0 where it divides by no sum). :func:`sp.cancel` brings them over one denominator, whose
    polynomial's terms grow as the product of theirs: a double backward's six sums of exps
    to the powers 2 and 3 (degree 14) held SymPy's heuristic gcd past 10 minutes (fuzz
    --affine 12800326), where no op of ops/ or tests/cases cancels past degree 6 (their
    wheres' insides not counted) and no module of those or tests/regressions changed under
    the bound."""
    powers: dict[sp.Expr, sp.Expr] = {}
    for f in sp.preorder_traversal(e):
        if isinstance(f, sp.Pow) and f.exp.is_negative and isinstance(f.base, sp.Add):
            powers[f.base] = max(powers.get(f.base, sp.S.Zero), -f.exp)
    return sp.Add(*powers.values())


def expand_product(e: sp.Expr) -> sp.Expr:
    """``expand_mul(e)`` with every sum that nests another sum standing as one factor: the
    product multiplied out over its own Adds and inside the innermost sums' bodies, never
    inside a nest.

    The walk is bottom-up: a nest below was simplified at its own levels already, each keeping
    or refusing its expansion by cost. SymPy's deep expand_mul multiplied out every body of
    the nest as well, and walking the result simplified each level of it again as a new
    expression, for every product above it: work exponential in the depth of the nest (a tanh
    MLP written as one op, a chain of contractions, doubled per layer: 400, 2656 expressions
    walked at 3 and 6 layers, 302 and 740 now). An innermost sum is re-opened as before (its
    body holds no sum: the walk of its expansion goes no deeper), so what is derived stays
    the same where the nest is one sum deep. The nests stand as symbols named by their sorted
    order (no ``Dummy``, whose numbering depends on what the process derived before), with a
    space in the name, which no op's name can hold."""
    nests = [s for s in e.atoms(sp.Sum) if s.function.has(sp.Sum)]
    if not nests:
        return sp.expand_mul(e)
    hidden = {
        s: sp.Symbol(f"nest {k}") for k, s in enumerate(sorted(nests, key=sp.default_sort_key))
    }
    return sp.expand_mul(e.xreplace(hidden)).xreplace({d: s for s, d in hidden.items()})


def _cancelled(e: sp.Expr, whole_powers: bool = False) -> sp.Expr:
    """``sp.cancel(e)`` with each where() standing as one symbol: SymPy's polynomials refuse a
    condition (``G - m - 1 >= 0`` is not commutative to them: fuzz --windows 12999 stopped on
    that PolynomialError); ``e`` itself where cancel still cannot take it. The stand-ins are
    named by the wheres' sorted order, never ``Dummy``s, whose numbering depends on what the
    process derived before (the output must not depend on ``--jobs``).

    With ``whole_powers``, a written power of a sum that cancel multiplied out is collected
    again wherever its expansion stands whole in a sum (:func:`_recollected`)."""
    wheres = sorted(e.atoms(where), key=sp.default_sort_key)
    hidden = {w: sp.Symbol(f"_where{k}") for k, w in enumerate(wheres)}
    whole = _cancelled_over(e, hidden)
    if not whole_powers or whole is e:
        return whole
    return _recollected(whole, _written_powers(e))


def _recollected(e: sp.Expr, powers: set[sp.Pow]) -> sp.Expr:
    """``e`` with each sum that holds the expansion of a written power, times a number, whole
    (``nu e^(2 s) + mu**2 - 2 mu y + y**2``) holding the power instead (``nu e^(2 s) + (y -
    mu)**2``).

    Multiplied out beside another term, a square of a difference cancels catastrophically
    where the difference is small against its terms: a Student-t loss's gradient divides by
    ``nu e^(2 s) + (y - mu)**2``, 32% off at mu = 5e4 with y - mu = 2**-10 and -inf at 1e5
    (found by probing), and no factoring recovers a square beside another term. Only an
    expansion that stands whole is collected: a sum whose monomials combined with the
    expansion's (``(u**2 + z**2)**2 - u**4``) keeps its form, which holding the power as one
    symbol through cancel had broken (a probe of the rule: that difference cancels at small z)."""
    if not powers:
        return e
    expansions = [
        (q, sp.Add.make_args(sp.expand(q))) for q in sorted(powers, key=sp.default_sort_key)
    ]

    def collect(add: sp.Add) -> sp.Expr:
        terms = list(add.args)
        for q, parts in expansions:
            if len(parts) < 2 or len(parts) > len(terms):
                continue
            for t in terms:
                c = t / parts[0]
                if not c.is_Number:
                    continue
                scaled = [c * p for p in parts]
                if all(p in terms for p in scaled):
                    terms = [t for t in terms if t not in scaled] + [c * q]
                    break
        return sp.Add(*terms) if len(terms) != len(add.args) else add

    return e.replace(lambda x: isinstance(x, sp.Add), collect)


def _cancelled_over(e: sp.Expr, hidden: dict[sp.Expr, sp.Symbol]) -> sp.Expr:
    """:func:`sp.cancel` of ``e`` with each key of ``hidden`` standing as its symbol, the
    numerator and denominator factored back; ``e`` itself where cancel cannot take it."""
    try:
        out = sp.cancel(e.xreplace(hidden))
        num, den = (_factored(p) for p in sp.fraction(out))
    except sp.PolynomialError:
        return e
    return (num / den).xreplace({d: w for w, d in hidden.items()})


def _written_powers(e: sp.Expr) -> set[sp.Pow]:
    """The whole positive powers of sums in ``e`` that read a tensor (``(y - mu)**2``), not
    inside another such power."""
    found: set[sp.Pow] = set()

    def visit(x: sp.Basic) -> None:
        if (
            isinstance(x, sp.Pow)
            and isinstance(x.base, sp.Add)
            and x.exp.is_Integer
            and x.exp > 1
            and x.base.has(sp.Indexed)
        ):
            found.add(x)
            return
        for a in x.args:
            visit(a)

    visit(e)
    return found


FACTORED_TERMS = 12  # a numerator or denominator factored back while it has at most this many


def _factored(p: sp.Expr) -> sp.Expr:
    """``p``, a polynomial :func:`sp.cancel` multiplied out, factored back where it has few
    terms: ``x**2 - 2 x + 1`` is ``(x - 1)**2`` again. Multiplied out, it loses to cancellation
    what the factors keep: ``x / (x - 1)``'s derivative ``-g / (x**2 - 2 x + 1)`` was 9e-5
    off at x = 1 + 1e-6 and -inf at 1 + 1e-8 (the factor ``x - 1`` is exact there: Sterbenz),
    ``(1 - x**2)`` over ``x**4 + 2 x**2 + 1`` overflowed at x = 1e77 (found by probing).
    Exact coefficients only: over Floats SymPy's factoring took minutes for a quotient of
    four terms (118 s against 4.7 s, found by probing the rule) and rescaled the
    coefficients to 15 digits."""
    if not isinstance(p, sp.Add) or len(p.args) > FACTORED_TERMS or p.has(sp.Float):
        return p  # a Float: factor rescales it (x**2 - 2.2 x + 1.21 is 1.21 (0.909.. x - 1)**2)
    return sp.factor(p)


def cancel_exps(expr: sp.Expr, simplify: Callable[[sp.Expr], sp.Expr]) -> sp.Expr:
    """Every product of ``expr``, bottom-up, through :func:`_cancelling_distributed`.

    A pass over a collapsed adjoint, not a rule of the simplifier: inside it, a product
    multiplied out early would hide the cancellations of the chain it is inlined into (the
    max-shift's adjoint of a focal loss stayed a sum equal to 0 and saved the argmax)."""
    memo: dict[sp.Basic, sp.Basic] = {}

    def walk(e: sp.Basic) -> sp.Basic:
        if not e.args or (len(e.atoms(sp.exp)) < 2 and not _denominators(e) | _lowered(e)):
            return e
        if e not in memo:
            args = [walk(a) for a in e.args]
            new = e.func(*args) if any(n is not o for n, o in zip(args, e.args)) else e
            memo[e] = _cancelling_distributed(new, simplify) if isinstance(new, sp.Mul) else new
        return memo[e]

    out = walk(expr)
    hoisted = _guards_hoisted(out) if out.has(where) and out.has(sp.exp) else out
    if hoisted is not out:  # kept only where it cancels an exp the guard held apart
        cancelled = walk(hoisted)
        if len(cancelled.atoms(sp.exp)) < len(out.atoms(sp.exp)):
            return cancelled
    return out


def _guards_hoisted(e: sp.Basic) -> sp.Basic:
    """``f where(c, a, 0) -> where(c, f a, 0)`` and ``f where(c, a, 0) + h where(c, b, 0) ->
    where(c, f a + h b, 0)``, bottom-up, so that one product holds what cancels.

    A guard stood between an exp and the product that cancels it: a focal loss with an
    ignore_index, ``where(t[n] >= 0, -(1 - p[t])**2 log p[t], 0)``, kept ``S exp(m - x[t])``
    inside the where() and ``(delta(c, t) - p[c]) e[c]`` outside, NaN at logits of +-1e4
    where the unguarded loss is finite (found writing ops as users do). Equal values where
    ``f`` is finite; where it is not and c fails, 0 (the select autograd's where backward
    gives) rather than NaN."""
    if not e.args or not e.has(where):
        return e
    args = [_guards_hoisted(a) for a in e.args]
    e = e.func(*args) if any(n is not o for n, o in zip(args, e.args)) else e
    if isinstance(e, sp.Mul) and any(_is_guard(f) for f in e.args):
        parts = [_split_guard(e)]
    elif isinstance(e, sp.Add):
        parts = [_split_guard(t) for t in e.args]
    else:
        return e
    if any(p is None for p in parts) or len({key for key, _ in parts}) != 1:
        return e
    (c, kept), value = parts[0][0], sp.Add(*[v for _, v in parts])
    return where(c, value, 0) if kept == 1 else where(c, 0, value)


def _split_guard(t: sp.Expr) -> tuple[tuple[sp.Expr, int], sp.Expr] | None:
    """``f where(c, a, 0)`` as ``((c, 1), f a)``, ``f where(c, 0, a)`` as ``((c, 2), f a)``;
    None where ``t`` has no such factor."""
    factors = sp.Mul.make_args(t)
    guard = next((f for f in factors if _is_guard(f)), None)
    if guard is None:
        return None
    rest = [f for f in factors if f is not guard]
    kept = 1 if guard.args[2] == 0 else 2
    return (guard.args[0], kept), sp.Mul(*rest, guard.args[kept])


def _is_guard(f: sp.Basic) -> bool:
    """where(c, a, 0) or where(c, 0, a): 0 wherever one side of c holds."""
    return isinstance(f, where) and (f.args[2] == 0 or f.args[1] == 0)


def _denominators(e: sp.Basic) -> set[sp.Expr]:
    """The bases of ``e``'s reciprocals that read a tensor or a param (not only sizes): each
    may be 0 where ``e`` is not infinite (``1 / (1 - p)`` at p = sigmoid(20) = 1 in float32;
    positive is not enough: sigmoid(-800) is 0 in float64 too)."""
    return {
        f.base
        for f in e.atoms(sp.Pow)
        if f.exp.is_negative and not all(s.is_integer for s in f.base.free_symbols)
    }


def _lowered(e: sp.Basic) -> set[sp.Expr]:
    """The bases (reading a tensor) of ``e``'s powers whose exponent a param may make negative:
    ``(1 - p)**(gamma - 1)``, a focal loss's derivative, is inf at p = 1 for gamma < 1, where
    the forward's ``(1 - p)**gamma`` is 0."""
    return {base for base, _ in _lowered_powers(e)}


def _lowered_powers(e: sp.Basic) -> collections.Counter:
    """(base, exponent) of each power :func:`_lowered` counts, as often as it occurs."""
    return collections.Counter(
        (f.base, f.exp)
        for f in sp.preorder_traversal(e)
        if isinstance(f, sp.Pow)
        and not f.exp.is_number
        and f.exp.is_nonnegative is not True
        and not all(s.is_integer for s in f.base.free_symbols)
        and f.base.has(sp.Indexed)
    )


def _raised(old: collections.Counter, after: sp.Expr) -> bool:
    """Whether ``after`` holds the powers :func:`_lowered` counts (``old``, those of the
    factors it was made of) with some of their exponents raised by a whole number and none
    new: ``b * b**(g - 1)`` as ``b**g`` is finite at b = 0 for every g > 0 the forward's
    ``b**g`` is."""
    new = _lowered_powers(after)
    gone, came = old - new, new - old
    if not gone:
        return False
    return all(
        any(b == b0 and (k - k0).is_Integer and (k - k0).is_positive for b0, k0 in gone)
        for b, k in came
    )


def _factored_toward(e: sp.Expr, bases: set[sp.Expr]) -> sp.Expr:
    """``e`` with each factor that is a sum and has one of ``bases`` (or its negation) as a
    polynomial factor written factored: tanh's derivative ``1 - t**2`` as ``(1 - t)(1 + t)``
    beside ``(1 - t)**(g - 1)``, so the power can take its ``1 - t``
    (:func:`_cancelling_distributed`). ``e`` itself where none has."""
    if not bases or not isinstance(e, sp.Mul):
        return e
    out, changed = [], False
    for f in e.args:
        # few terms, exact coefficients: SymPy's factoring is slow past them (_factored)
        if isinstance(f, sp.Add) and len(f.args) <= FACTORED_TERMS and not f.has(sp.Sum, sp.Float):
            factored = sp.factor(f)
            if any(b in bases or -b in bases for b in sp.Mul.make_args(factored)):
                f, changed = factored, True
        out.append(f)
    return sp.Mul(*out) if changed else e


def raised_powers(e: sp.Expr, other: sp.Expr) -> bool:
    """Whether ``other`` is ``e`` with powers a param may make negative raised (see
    :func:`_raised`): ``e`` is then inf where ``other`` is finite, so no rule that trades one
    for the other by cost may pick ``e``."""
    return _raised(_lowered_powers(e), other)


def exps_merged(expr: sp.Expr) -> sp.Expr:
    """Every product of ``expr`` with its exps merged where one goes whole
    (:func:`_exps_cancelled`)."""
    if not isinstance(expr, sp.Basic) or len(expr.atoms(sp.exp)) < 2:
        return expr
    return expr.replace(lambda e: isinstance(e, sp.Mul), _exps_cancelled)


def _exps_cancelled(e: sp.Mul) -> sp.Expr:
    """``exp(a) exp(-a) r -> r``: the product with its exps merged, where one at least goes
    whole (two exps for none, or an atom the exponents cancel); ``e`` itself otherwise.

    A sigmoid taken out of an exp ratio (:func:`derive.identities.exp_ratios`) can leave
    ``exp(a)`` beside an ``exp(-a)`` of the chain (a log-cosh written ``log((e^(x-y) +
    e^(y-x)) / 2)``: ``e^(x-y) sigmoid(2(x-y)) e^(y-x)``), which Mul keeps apart: 0 * inf at
    |x - y| > 709 (found by probing). Merged,
    the product is finite wherever its value is; two exps merged that cancel nothing
    (``exp(a(k)) exp(b)``) stay apart, as a sum over k pulls ``exp(b)`` out."""
    before = e.atoms(sp.exp)
    if len(before) < 2:
        return e
    combined = powsimp_exp(e)
    if combined == e:
        return e
    gone = len(combined.atoms(sp.exp)) + 2 <= len(before)
    return combined if gone or _cancels(combined, e) else e


def _cancelling_distributed(e: sp.Mul, walk: Callable[[sp.Expr], sp.Expr]) -> sp.Expr:
    """``f (a + b) -> f a + (f b)`` where ``f b`` simplifies to fewer exps or fewer
    reciprocals: range before cost.

    An exp the product cancels only once multiplied out is ``0 * inf`` kept apart: a focal
    loss by hand, ``-(1 - p[y])**2 log p[y]`` with ``p = e / Sum(e)``, differentiates ``log p``
    to ``1/p = S exp(m - x[y])`` (inf where p[y] underflows) in one term of a sum the rest of
    the product, ``(delta(c, y) - p[c]) p[y]``, would cancel it in. So is a reciprocal: a
    sigmoid focal loss, ``ce (1 - pt)**2`` with ``ce = -t log p - (1 - t) log(1 - p)``, has
    ``dx = p (1 - p) (((1 - t) / (1 - p) - t / p) dce + (2 t - 1) dpt)``, nan at p = 1 (x = 20
    in float32) and at p = 0 (x = -800) kept apart; the first term multiplied out is
    ``(p - t) dce``. Expanding the whole product costs more operations than it saves, so the
    cost model keeps it; here only the terms whose exps or reciprocals cancel are multiplied
    out (a term is tried for a reciprocal only where the rest of the product holds its base
    as a factor), the rest keep the product's shape."""
    merged = _merged_powers(e)
    if merged is not e:
        return merged
    written, e = e, _factored_toward(e, _lowered(e))  # the factored form only where it moves
    exps = len(e.atoms(sp.exp)) >= 2
    factors = sp.Mul.make_args(e)
    for i, a in enumerate(factors):
        if not isinstance(a, sp.Add):
            continue
        rest = sp.Mul(*factors[:i], *factors[i + 1 :])
        bases = _factor_bases(rest)
        kept, moved = [], []
        for t in a.args:
            n_exps = len(rest.atoms(sp.exp) | t.atoms(sp.exp))
            out = None
            if exps:  # Mul may combine exps already: count apart
                out = _multiplied_out(rest * t, walk)
                if out is not None and len(out.atoms(sp.exp)) >= n_exps:
                    out = None
            denominators = _denominators(t)
            if out is None and denominators & bases:
                out = walk(_pushed(rest, t))
                if len(out.atoms(sp.exp)) > n_exps or not (
                    len(_denominators(out)) < len(denominators | _denominators(rest))
                ):
                    out = None
            if out is None and _lowered(t) & bases:
                out = walk(_pushed(rest, t, _lowered))
                before = _lowered_powers(rest) + _lowered_powers(t)  # rest * t merges some
                if len(out.atoms(sp.exp)) > n_exps or not _raised(before, out):
                    out = None
            if out is None:
                kept.append(t)
            else:
                moved.append(out)
        if moved:
            return rest * sp.Add(*kept) + sp.Add(*moved)
    for i, w in enumerate(factors):  # b where(c, 0, b**(g - 1)): into the branches
        rest = sp.Mul(*factors[:i], *factors[i + 1 :])
        if isinstance(w, where) and _lowered(w) & _factor_bases(rest):
            out = walk(_pushed(rest, w, _lowered))
            if _raised(_lowered_powers(rest) + _lowered_powers(w), out):
                return out
    return written


def _merged_powers(e: sp.Mul) -> sp.Expr:
    """``B**g / B -> B**(g - 1)`` and ``B**g / (-B) -> -B**(g - 1)``, where a reciprocal's
    base is (the negation of) another factor's: 0 / 0 at B = 0 kept apart. A focal loss with
    gamma a param, ``(1 - pt)**gamma`` differentiated beside ``1 / (pt - 1)``, was nan at a
    confident prediction where torch's gradient is 0. ``e`` itself where nothing merges."""
    factors = [f.as_base_exp() for f in sp.Mul.make_args(e)]
    reciprocals = {b for b, k in factors if k.is_negative and _denominators(b**k)}
    others = {b for b, k in factors if not k.is_negative}
    if not reciprocals & (others | {-b for b in others}):
        return e
    out = sp.powsimp(e, combine="exp")
    return out if len(_denominators(out)) < len(_denominators(e)) else e


def _factor_bases(e: sp.Expr) -> set[sp.Expr]:
    """The bases of ``e``'s factors raised to a positive power, and their negations."""
    bases = set()
    for f in sp.Mul.make_args(e):
        base, power = f.as_base_exp()
        if not base.is_number and power.is_positive:
            bases |= {base, -base}
    return bases


def _pushed(
    rest: sp.Expr, t: sp.Expr, held: Callable[[sp.Expr], set[sp.Expr]] = _denominators
) -> sp.Expr:
    """``rest * t`` with ``rest`` multiplied into the sums inside ``t`` that hold reciprocals
    of its factors (``held`` names their bases), down to the products that hold them, where
    SymPy's Mul cancels ``b / b``: ``p (1 - p) ((1 - y) / (1 - p) - y / p) -> p (1 - y) -
    (1 - p) y``, and into the branches of a where() that holds one (``b where(c, 0, b**(g -
    1)) -> where(c, 0, b**g)``; 0 rather than nan where ``rest`` is not finite and c picks
    the 0, as a guard hoisted gives). Unlike ``expand``, nothing else is multiplied out
    (expanded, ``1 - p`` is ``1 - p`` no longer)."""
    bases = _factor_bases(rest)
    if not held(t) & bases:
        return rest * t
    if isinstance(t, sp.Add):
        return sp.Add(*[_pushed(rest, u, held) for u in t.args])
    inner = [f for f in sp.Mul.make_args(t) if isinstance(f, sp.Add) and held(f) & bases]
    if inner:
        return _pushed(rest * sp.Mul(*without(sp.Mul.make_args(t), inner[0])), inner[0], held)
    cases = [f for f in sp.Mul.make_args(t) if isinstance(f, where) and held(f) & bases]
    if cases:
        outer = rest * sp.Mul(*without(sp.Mul.make_args(t), cases[0]))
        c, a, b = cases[0].args
        return where(c, _pushed(outer, a, held), _pushed(outer, b, held))
    # a factor b of rest against 1 / (-b): b = -1 * (-b), which Mul cancels
    negated = {-d for d in held(t)}
    signs = sum(1 for f in sp.Mul.make_args(rest) if f in negated)
    aligned = [-f if f in negated else f for f in sp.Mul.make_args(rest)]
    return _same_bases_merged(sp.Mul(sp.Integer(-1) ** signs, *aligned, t), held(t))


def _same_bases_merged(e: sp.Expr, bases: set[sp.Expr]) -> sp.Expr:
    """``e``'s factors over each of ``bases`` as one power: ``b * b**(g - 1) -> b**g``, which
    SymPy's Mul leaves apart where b is a sum (``(1 - p) (1 - p)**(g - 1)``)."""
    exponents: dict[sp.Expr, list[sp.Expr]] = {}
    others = []
    for f in sp.Mul.make_args(e):
        base, power = f.as_base_exp()
        if base in bases:
            exponents.setdefault(base, []).append(power)
        else:
            others.append(f)
    return sp.Mul(*others, *(b ** sp.Add(*ks) for b, ks in exponents.items()))


def _multiplied_out(e: sp.Expr, walk: Callable[[sp.Expr], sp.Expr]) -> sp.Expr | None:
    """``e`` expanded, exps combined in each term, then simplified (None when too many terms)."""
    if expanded_terms(e) > EXPAND_TERMS:
        return None
    return walk(sp.Add(*[powsimp_exp(t) for t in sp.Add.make_args(sp.expand_mul(e))]))


def _delta_substituted(e: sp.Mul) -> sp.Expr:
    """``delta(c, a) f(c) -> delta(c, a) f(a)`` where that lets factors cancel: the product is
    0 wherever c is not a, so f is read at a alone (a scatter of f(a), once lowered).
    ``delta(c, y[n]) e[n, c] exp(m[n] - x[n, y[n]])`` is ``delta(c, y[n])``: the picked
    probability's ``1 / p`` against its own ``e``, which kept apart are 0 * inf at logits of
    +-1e4 (a cross-entropy written as ``-log(p[n, y[n]])`` with ``p = e / Sum(e)``)."""
    factors = sp.Mul.make_args(e)
    if not any(isinstance(f, sp.KroneckerDelta) for f in factors) or not e.has(sp.exp):
        return e  # what cancels here is exp(a) exp(-a)
    for d in factors:
        if not isinstance(d, sp.KroneckerDelta):
            continue
        for c, a in (d.args, d.args[::-1]):
            if not (c.is_Symbol and c.is_integer) or a.has(c):
                continue
            # factors with a sum stay as they are: no index of theirs is renamed or captured
            rest = sp.Mul(*[f for f in without(factors, d) if not f.has(sp.Sum)])
            sums = sp.Mul(*[f for f in without(factors, d) if f.has(sp.Sum)])
            if not rest.has(c):
                continue
            moved = powsimp_exp(rest.xreplace({c: a}))
            if cost(moved) < cost(rest) and _cancels(moved, rest):
                return d * moved * sums
    return e


def powsimp_exp(e: sp.Expr) -> sp.Expr:
    """``sp.powsimp(e, combine="exp")``, skipped where it provably returns ``e`` itself.

    powsimp asks ``is_positive`` of every base of every product it meets (SymPy's assumption
    system, walking Sums) and usually finds nothing to combine: in the attention op's
    derivation it never changed an expression and took a fifth of the time. Its ``exp`` mode
    (SymPy 1.14) descends through sums and products only, and changes a product only when two
    of its factors share something: a base (``exp(a) exp(b)``; other equal bases Mul already
    merged), inverse bases (``b**e (1/b)**f``), negated bases (``(x - y)(y - x)``), a number
    base beside the coefficient (``2**x / 4``), a base that is itself a product, power or
    number (``sqrt(x y)``, ``(x**a)**b``, denested). :func:`_powsimp_inert` rules each of those
    out; anything it does not recognise goes to powsimp.
    """
    return e if _powsimp_inert(e) else sp.powsimp(e, combine="exp")


@functools.lru_cache(maxsize=1 << 16)
def _powsimp_inert(e: sp.Basic) -> bool:
    """True when ``powsimp(e, combine="exp")`` returns ``e`` unchanged: every product it reaches
    (through sums, products and powers, as powsimp recurses) is :func:`_inert_product`.
    Anything else (a function, a Sum, exp, an atom) powsimp returns as it is."""
    if e.is_Add:
        return all(_powsimp_inert(t) for t in e.args)
    if e.is_Mul:
        return _inert_product(e.args) and all(_powsimp_inert(a) for a in e.args)
    if e.is_Pow:  # powsimp(b**x) is powsimp(b**x * y) / y, a product of two factors
        return _inert_product((e, _OTHER))
    return True


_OTHER = sp.Dummy("other")  # a factor no other one combines with (powsimp's own is a Dummy)


def _plain(f: sp.Basic) -> bool:
    """A factor powsimp keys as ``(f, 1)`` and cannot rewrite alone: not a number, power, exp or
    product, and commutative, with SymPy's default ``as_base_exp``."""
    return (
        not isinstance(f, (sp.Number, sp.NumberSymbol, sp.Pow, sp.exp, sp.Mul))
        and f.is_commutative
        and type(f).as_base_exp is sp.Expr.as_base_exp
    )


def _inert_product(factors: tuple[sp.Basic, ...]) -> bool:
    """The factors (a rational coefficient; plain factors, powers of plain bases and at most
    one exp, keyed by base: f, b of b**x, E of exp(a)) have distinct bases, no base is the
    inverse of another and no sum is the negation of another: powsimp's exp mode has nothing
    to combine, and rebuilds each factor as it was."""
    bases = []
    for f in factors:
        if f.is_Rational:
            continue
        if isinstance(f, sp.exp):
            bases.append(sp.S.Exp1)
        elif isinstance(f, sp.Pow) and _plain(f.base):
            bases.append(f.base)
        elif _plain(f):
            bases.append(f)
        else:
            return False
    keys = set(bases)
    if len(keys) != len(bases):
        return False
    if any(not _inverse_is_no_factor(b) and sp.Pow(b, -1) in keys for b in bases):
        return False
    sums = [b for b in bases if b.is_Add]
    return len(sums) < 2 or not any(-b in keys for b in sums)


def _inverse_is_no_factor(b: sp.Basic) -> bool:
    """``1/b`` is no plain factor and not E, so no base can be b's inverse (building ``1/b`` to
    look asks ``is_number`` of the whole base). For a plain ``b`` (or E) SymPy's ``Pow(b, -1)``
    returns ``b._eval_power(-1)`` when that is not None, else a Pow: the default
    ``_eval_power`` is None, a sum's is a number or a product, and ``1/E`` is exp(-1)."""
    return b is sp.S.Exp1 or type(b)._eval_power in (sp.Expr._eval_power, sp.Add._eval_power)
