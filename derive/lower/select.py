"""Selections in the lowering: where(), index comparisons, constant subscripts and their stacks.

Functions of the lowering's :class:`~derive.lower.context.Context` (its names and aliases);
the stacks are :func:`derive.lower.assign.stack`'s. The identities, with what they emit:

- ``t2 <= t1`` -> ``torch.arange(T) <= torch.arange(T)[:, None]``: a broadcast boolean over
  the two index axes (the causal mask, a T x T bool), never a float one-hot
- ``where(c, a, b)`` -> ``torch.where(c, a, b)``; ``where(c, a, 0)`` with a a number ->
  ``c.to(dtype) * a``; ``-inf`` -> ``float("-inf")``
- ``W[c, 1, h, d]`` -> ``W[:, 1]``: a constant subscript is a slice (a view, nothing copied),
  so the slice takes part in matmul/einsum like any tensor; ``h[b, T - 1, c]`` -> ``h[:, -1]``
- ``delta(i, 0) A + delta(i, 1) B + delta(i, 2) C`` -> ``torch.stack([A, B, C], pos)``: the
  adjoint of three constant subscripts along one axis, never three masked full-size temporaries
"""

from __future__ import annotations

import sympy as sp

from derive.functions import clamp, where
from derive.ir import nodes as ir
from derive.language.ranges import from_end
from derive.lower.context import Context
from derive.lower.indexing import index_value
from derive.lower.value import align, union
from derive.symbolic.seeds import given

RELATIONS = {
    sp.Equality: "==",
    sp.Unequality: "!=",
    sp.LessThan: "<=",
    sp.StrictLessThan: "<",
    sp.GreaterThan: ">=",
    sp.StrictGreaterThan: ">",
}


def numbers_out(e: sp.Expr) -> sp.Expr:
    """``e`` with every where() of a 0 branch rid of its other branch's number:
    ``where(c, k A, 0) = k where(c, A, 0)``, innermost first. A term that differs from
    another by a number alone (``where(c, 0, -exp(s))`` beside ``where(c, 0, exp(s))``, a
    hinge's ``2 relu(m)`` and ``-2 relu(m)``) then holds the same selection, which is
    computed once (a sum's memo, the common subexpressions); written apart, each was a
    where() over the whole (N, M) again (a supervised contrastive loss's backward made 18,
    found surveying). Equal: k times the 0 branch is 0, and the taken branch is k A."""
    if not e.has(where):
        return e

    def out(w: where) -> sp.Expr:
        cond, a, b = w.args
        k, rest = (a if b == 0 else b).as_coeff_Mul()
        if (a != 0 and b != 0) or k in (1, 0) or rest == 1 or not (k.is_number and k.is_finite):
            return w  # a where() of numbers stays one (its mask arithmetic is exact or not)
        return k * (where(cond, rest, 0) if b == 0 else where(cond, 0, rest))

    return e.replace(lambda x: isinstance(x, where), out)


def is_sliced(e: sp.Basic) -> bool:
    """An Indexed with a constant subscript (``W[c, 1, h, d]``, ``h[b, T - 1, c]``)."""
    return isinstance(e, sp.Indexed) and any(
        _constant(e, k) is not None for k in range(len(e.indices))
    )


def _constant(ind: sp.Indexed, k: int) -> int | None:
    """Subscript ``k`` of ``ind`` as a python index: a constant, or an entry counted from the
    axis's end (``T - 1`` is -1, the last); None where it is neither."""
    i = ind.indices[k]
    if i.is_Integer:
        return int(i)
    back = from_end(i, ind.base.shape[k]) if ind.base.shape is not None else None
    return None if back is None else -back


def safe_indices(cx: Context, expr: sp.Expr) -> sp.Expr:
    """A guarded int input (:func:`derive.language.guards.guarded_data`) used as a subscript
    is read clamped to 0 and up: its negative entries, ignored by their where(), index nothing
    out of range (the range check admits no other: a -2 under ``t != -1`` is refused). In the
    backward the ignored positions' coefficients are where(X >= 0, ..., 0) = 0, so the scatter
    into index 0 adds nothing."""
    replace = {}
    for ind in expr.atoms(sp.Indexed, sp.KroneckerDelta):
        subs = ind.indices if isinstance(ind, sp.Indexed) else ind.args
        for sub in subs:
            if isinstance(sub, sp.Indexed) and sub.base.label.name in cx.guarded:
                label = sub.base.label.name
                name = cx.alias(f"{label}_index", ir.Clamp(cx.tensor(label)))
                base = sp.IndexedBase(name, shape=sub.base.shape, integer=True)
                replace[sub] = base[sub.indices]
    if not replace:
        return expr

    # only the subscripts, nested ones too (x[ids[pos[i]]], as inlining writes a pick of a
    # pick), in where() conditions as well: a guard ``X[i] >= 0`` reads the data itself (X[i]
    # is no subscript there), but a condition the simplifier hoisted out of its guard,
    # ``X[i] == Y[i, X[i]]`` in ``where(c, where(X[i] >= 0, a, 0), 0)``, must not index with
    # a negative entry; both branches are 0 at such an entry, so any in-range read will do
    def sub(i: sp.Expr) -> sp.Expr:
        if i in replace:  # its own subscripts may be guarded reads too: Y[i, X[i]]
            return replace[i].base[tuple(sub(j) for j in i.indices)]
        return walk(i)

    def walk(e: sp.Basic) -> sp.Basic:
        if isinstance(e, sp.Indexed):
            return e.func(e.base, *[sub(i) for i in e.indices])
        if isinstance(e, sp.KroneckerDelta):
            return sp.KroneckerDelta(*[sub(a) for a in e.args])
        if not e.args:
            return e
        return e.func(*[walk(a) for a in e.args])

    return walk(expr)


def slice_constants(cx: Context, expr: sp.Expr) -> sp.Expr:
    """Every ``W[c, 1, h, d]`` in ``expr`` as a plain tensor ``W[:, 1]`` over (c, h, d)."""
    replace = {}
    for ind in expr.atoms(sp.Indexed):
        at = [_constant(ind, k) for k in range(len(ind.indices))]
        whole = all(k is not None for k in at)
        if not is_sliced(ind) or (whole and ind.base.is_integer):
            continue  # an int entry, t[0], stays a data subscript read where it is used
        label = ind.base.label.name
        keep = [k for k, c in enumerate(at) if c is None]
        while at and at[-1] is None:
            at.pop()
        named = ("all" if k is None else str(k) if k >= 0 else f"end{-k}" for k in at)
        stem = f"{label}_at_{'_'.join(named)}"
        sizes = tuple(ind.base.shape[: len(at)]) if ind.base.shape is not None else ()
        name = cx.alias(stem, ir.Slice(cx.tensor(label), tuple(at), sizes))
        if whole:  # W[1, 2]: one entry, a 0-d tensor read in place (see the lowerer's symbols)
            replace[ind] = sp.Symbol(name, real=True)
            continue
        shape = tuple(ind.base.shape[k] for k in keep)
        base = sp.IndexedBase(name, shape=shape, **_kind(ind.base))
        replace[ind] = base[tuple(ind.indices[k] for k in keep)]
    return expr.xreplace(replace) if replace else expr


def relation(cx: Context, e: sp.core.relational.Relational, order: list[sp.Symbol]) -> ir.Node:
    """An index (or int data) comparison: a broadcast boolean over the axes it reads."""
    op = next((op for cls, op in RELATIONS.items() if isinstance(e, cls)), None)
    if op is None:
        raise ValueError(f"unsupported comparison {e}")
    a, b = (index_value(cx, x, order) for x in e.args)
    axes = union([a.axes, b.axes], order)
    return ir.Binary(op, align(a, axes), align(b, axes), axes=axes)


def where_value(cx: Context, e: where, order: list[sp.Symbol]) -> ir.Node:
    if (held := held_under_gates(e)) is not e:
        return cx.value(held, order)
    cond = cx.value(e.args[0], order)  # a comparison of its own: its ints stay ints
    a, b = (_branch(cx, x, order) for x in e.args[1:])
    if isinstance(a, ir.Number) and isinstance(b, ir.Number) and a.value == b.value:
        # branches SymPy kept apart that lower to one number (where(c, 0, 1) * where(c, 1, 0)
        # is 0 in each case): the where is that number, and reads neither the condition's axes
        # nor drops a branch's (fuzz 700637: the indicator kept the mask's axes and lost z)
        return a
    if cond.scalar:  # params and numbers only (alpha <= 0): a python bool, known per call
        if a.scalar and b.scalar:
            return ir.Select(cond, a, b)
        cond = ir.AsTensor(cond, cx.like)  # torch.where takes no python bool
    if a.scalar and b.scalar and _exact_indicator(*e.args[1:]):  # the mask as floats
        scale = cx.value(e.args[1] - e.args[2], [])
        scale = None if ir.is_number(scale, 1) else scale
        offset = None if ir.is_number(b, 0) else b
        return ir.Indicator(cond, scale, offset, cx.like, axes=cond.axes)
    if a.scalar and b.scalar:
        # torch.where selects, one branch a 0-d tensor in the op's dtype and device (two python
        # numbers give torch's default dtype): see _exact_indicator for what the mask would lose
        a = _tensor(a, cx.like)
        b = _tensor(b, cx.like) if _beyond_float32(b) else b
        return ir.Where(cond, a, b, axes=cond.axes)
    if isinstance(a, ir.Where) and b.scalar and a.b == b and not cond.scalar and not a.cond.scalar:
        # where(c1, where(c2, x, v), v) = where(c1 & c2, x, v): one pass over x, not two (a
        # read kept inside an axis, 0 <= k <= G - 1: derive.lower.equalities)
        inner = union([cond.axes, a.cond.axes], order)
        cond = ir.Binary("&", align(cond, inner), align(a.cond, inner), axes=inner)
        a = a.a
    axes = union([cond.axes, a.axes, b.axes], order)
    return ir.Where(*(align(v, axes) for v in (cond, a, b)), axes=axes)


def held_under_gates(e: where) -> sp.Expr:
    """``where(a >= lo, where(a <= hi, f, 0), 0)`` with each subscript ``a`` of f read as
    ``clamp(a, lo, hi)`` where f reads that clamp already: equal where the gates hold, and
    one position in place of two, so a sum under them is taken at every position and
    gathered once (:func:`derive.lower.reductions._gathered_late`). A delta solved for an
    index reads the body's finite factors at ``a`` and the rest at the clamp (relative
    keys' table adjoint, ``q[b, a, d]`` beside ``dsc[b, clamp(a, 0, T - 1), t]``: a (B, T,
    2T - 1, D) gather of both where one (T, T, D) contraction does, found probing). ``e``
    itself where nothing changes."""
    conds, body = [], e
    while isinstance(body, where) and body.args[2] == 0:
        conds.append(body.args[0])
        body = body.args[1]
    held = {}
    for c in body.atoms(clamp):
        a, lo, hi = c.args
        if sp.Ge(a, lo) in conds and sp.Le(a, hi) in conds:
            held[a] = c
    reads = {
        r: r.base[tuple(held.get(i, i) for i in r.indices)]
        for r in body.atoms(sp.Indexed)
        if any(i in held for i in r.indices)
    }
    if not reads:
        return e
    body = body.xreplace(reads)
    for c in reversed(conds):
        body = where(c, body, 0)
    return body


# integers this small, and their differences, are exact in every float dtype (bfloat16 has an
# 8-bit significand: 257 is not a bfloat16)
EXACT_INTEGER = 256


def _exact_indicator(a: sp.Expr, b: sp.Expr) -> bool:
    """Whether ``c * (a - b) + b`` is exactly ``a`` where c holds and ``b`` where it fails.

    Where one branch is 0 and the other finite whatever the sizes (``c a``, ``b - c b``;
    ``1/sqrt(D)``), or both are integers as small as :data:`EXACT_INTEGER`. Otherwise the
    arithmetic rounds: ``(3 - 1e17) + 1e17`` is 0 in float64, not 3 (a silently wrong
    forward), ``-0.4 + 0.7`` is 0.30000000000000004; an infinite branch gives 0 * inf = nan
    where c fails (fuzz 740143); a param may be inf, and its value is not known here.
    """

    def known_finite(v: sp.Expr) -> bool:  # numbers and sizes: a param is a real symbol
        return v.is_finite is True and all(s.is_integer for s in v.free_symbols)

    if not (known_finite(a) and known_finite(b)):
        return False
    if a == 0 or b == 0:
        return True
    return all(v.is_Integer and abs(v) <= EXACT_INTEGER for v in (a, b, a - b))


FLOAT32_MAX = 3.4028234663852886e38


def _beyond_float32(v: ir.Node) -> bool:
    """A finite number float32 cannot hold: torch.where and torch.tensor raise on it there."""
    return isinstance(v, ir.Number) and v.value.is_finite and abs(v.value) > FLOAT32_MAX


def _tensor(v: ir.Node, like: ir.Node) -> ir.Node:
    """``v`` as a 0-d tensor in the dtype and on the device of ``like``. A number beyond
    float32's range is made in float64 and cast, so float32 rounds it to inf as x * 1e308
    does, instead of raising."""
    if _beyond_float32(v):
        return ir.Apply(
            "torch.tensor({0}, dtype=torch.float64, device={1}.device).to({1}.dtype)", (v, like)
        )
    return ir.Apply("torch.tensor({0}, dtype={1}.dtype, device={1}.device)", (v, like))


def _branch(cx: Context, x: sp.Expr, order: list[sp.Symbol]) -> ir.Node:
    if x in (sp.oo, -sp.oo):
        return ir.Number(x)
    return cx.value(x, order)


def _kind(base: sp.IndexedBase) -> dict:
    return {"integer": True} if base.is_integer else {"real": True}


def given_value(cx: Context, e: given, order: list[sp.Symbol]) -> ir.Node:
    """``(term if present[k] else zeros)``: a python conditional, so a term whose cotangents
    were not given is never read (:mod:`derive.symbolic.seeds`); zeros of its own shape, so
    the sum it is part of keeps its shape."""
    term = cx.value(e.args[0], order)
    cond = ir.Given(e.positions)
    if term.scalar:
        return ir.Select(cond, term, ir.Number(0))
    zeros = ir.Zeros(tuple(cx.size(a) for a in term.axes), cx.like, axes=term.axes)
    return ir.Select(cond, term, zeros, axes=term.axes)
