"""The pure helpers every module of :mod:`derive.lower` shares: how kernel-IR nodes
(:mod:`derive.ir.nodes`) are aligned, permuted and combined, how a product's python numbers fold
into one, how delta terms split off, and the :class:`Scope` a fusion's match reads. No state
(:mod:`derive.lower.context` holds it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import sympy as sp

from derive.functions import clamp, where
from derive.ir import nodes as ir
from derive.ir import orders
from derive.symbolic.indices import free_indices, replace_apart


class AxisError(ValueError):
    """A value's axes do not fit where it is used: a lowering bug, never silently emitted."""


def chain(op: str, first: ir.Node, rest: list[ir.Node], **kw) -> ir.Node:
    """``first op r0 op r1 ...``, left to right (``op`` applied at each step)."""
    for r in rest:
        first = ir.Binary(op, first, r, **kw)
    return first


def number_scale(num: list[ir.Node], den: list[ir.Node], negative: bool) -> tuple | None:
    """The python-number part of a product, as one operation on the smallest tensor factor:
    ``(op, node)`` to apply, ``* N``, ``/ D`` or ``* (-2 * N / D)``."""
    if not num and not den:
        return None
    if not negative and len(num) + len(den) == 1:
        return ("*", num[0]) if num else ("/", den[0])
    group = chain("/", chain("*", num[0] if num else ir.Number(1), num[1:]), den)
    return "*", ir.Paren(ir.Neg(group) if negative else group)


def natural_order(body: sp.Expr, order: list[sp.Symbol]) -> list[sp.Symbol]:
    """Axes in the order the body's largest tensor stores them, so sums need no transpose;
    each other read's axes (widest first) before the first axis it stores after them. So
    ``(x[n, k] - mu[m, k])**2`` summed over k is laid out (n, m, k), k last as both tensors
    store it, and summed over the last axis; taken from x alone, (n, k, m) read mu
    transposed in the inner loop (a soft k-means 1.2x autograd's time, 0.67x now)."""
    leaves = [i for i in body.atoms(sp.Indexed) if plain(i)]
    if not leaves:  # every read shifted (x[t - k]) or gathered: the body's indices after order
        return list(order) + sorted(free_indices(body) - set(order), key=str)
    leaves = sorted(leaves, key=lambda i: (len(i.indices), sp.default_sort_key(i)), reverse=True)
    natural = list(dict.fromkeys(leaves[0].indices))  # a diagonal x[n, n] gives n once
    for read in leaves[1:]:  # the others' axes before the axes they store after them
        for k, a in enumerate(read.indices):
            if a in natural:
                continue
            after = [natural.index(b) for b in read.indices[k + 1 :] if b in natural]
            natural.insert(min(after, default=len(natural)), a)
    return (
        natural
        + [a for a in order if a not in natural]
        + sorted(free_indices(body) - set(natural) - set(order), key=str)
    )


def position(order: list[sp.Symbol]):
    return lambda a: order.index(a) if a in order else len(order)


def union(groups: list[tuple], order: list[sp.Symbol]) -> tuple:
    """Every axis of ``groups`` once, in ``order``'s order; the axes ``order`` lacks after
    them as they first come (a set's order would follow the hash seed)."""
    return tuple(sorted(dict.fromkeys(a for g in groups for a in g), key=position(order)))


def permute(v: ir.Node, axes: tuple) -> ir.Node:
    """``v`` with its axes in the order they have in ``axes`` (a transpose when needed)."""
    want = tuple(a for a in axes if a in v.axes)
    if len(want) != len(v.axes):
        stray = [str(a) for a in v.axes if a not in axes]
        raise AxisError(f"a value over {stray} cannot take the axes {[str(a) for a in axes]}")
    if want == v.axes:
        return v
    return _composed(v, tuple(v.axes.index(a) for a in want), want)


def _composed(v: ir.Node, perm: tuple[int, ...], axes: tuple) -> ir.Node:
    """``v`` permuted by ``perm``, a permute of a permute as one (and none where they undo
    each other: ``x.T.T`` is ``x``, two view calls fewer)."""
    if isinstance(v, ir.Permute):
        perm, v = tuple(v.perm[q] for q in perm), v.arg
        if perm == tuple(range(len(perm))):
            return ir.relabel(v, axes)
    return ir.Permute(v, perm, axes=axes)


def filled(v: ir.Node, shape: tuple, like: ir.Ref, axes: tuple) -> ir.Node:
    """A python number ``v`` as a new tensor of ``shape`` over ``axes`` in ``like``'s dtype."""
    if ir.is_number(v, 0):
        return ir.Zeros(shape, like, axes=axes)
    return ir.Full(shape, v, like, axes=axes)


def align(v: ir.Node, axes: tuple) -> ir.Node:
    """``v`` permuted to the order of ``axes``, with size-1 axes for those it lacks, so it
    broadcasts against a tensor over ``axes``. Axis order is data: never assumed.

    A value that prints fewer axes than it names (``s[:, None]``, element-wise work on such
    broadcasts) holds the last :func:`~derive.ir.orders.rank` of them. Here a broadcast's
    rank once counted its ``kept`` flags alone, not its operand's axes: aligned again, the
    value came out ``s[:, None][]`` (not Python), or with its size-1 axis at the wrong place
    (fuzz --windows 6500045, 6500062, 6500171)."""
    if v.scalar:
        return v
    v = permute(v, axes)
    if v.axes == axes[len(axes) - len(v.axes) :]:
        return v
    held = v.axes[len(v.axes) - orders.rank(v) :]
    kept = [a in held for a in axes]
    while kept and not kept[0]:  # leading size-1 axes broadcast by themselves
        kept.pop(0)
    while kept and kept[-1]:  # x[:, None] is x[:, None, :, :]
        kept.pop()
    if not kept:  # it holds the last axes already: nothing to add (``x[]`` is no Python)
        return v
    return ir.Broadcast(v, tuple(kept), axes=axes)


def dense_axes(v: ir.Node) -> set[sp.Symbol]:
    """The axes ``v`` holds at full size: an aligned node is labelled with every axis, but
    broadcasts over those it had none for (size 1), and a ``reshape(-1)`` counts only these."""
    if v.scalar:
        return set()
    if isinstance(v, (ir.Broadcast, ir.Permute)):
        return dense_axes(v.arg)
    if isinstance(v, ir.Map):
        return set().union(*(dense_axes(c) for c in v.children()))
    return set(v.axes)


def stem(e: sp.Expr) -> str:
    """A temporary's name from the tensors it reads: ``sum_h_W``."""
    return "_".join(sorted({i.base.label.name for i in e.atoms(sp.Indexed)}))


def plain(f: sp.Expr) -> bool:
    return isinstance(f, sp.Indexed) and all(isinstance(i, sp.Symbol) for i in f.indices)


def transposed(x: ir.Node) -> ir.Node:
    return _composed(x, (1, 0), x.axes[::-1])


def matmul(a: ir.Node, b: ir.Node, bound: list, out: tuple) -> ir.Matmul | None:
    """``a @ b`` (either side transposed as needed) when two matrices meet over one axis and
    leave ``out``, in order; else None."""
    if len(bound) != 1 or len(a.axes) != 2 or len(b.axes) != 2 or len(out) != 2:
        return None
    (k,) = bound
    for x, y in ((a, b), (b, a)):
        left = x if x.axes[1] == k else transposed(x)
        right = y if y.axes[0] == k else transposed(y)
        if (left.axes[0], right.axes[1]) == out:
            return ir.Matmul(left, right, axes=out)
    return None


def ordered_terms(e: sp.Add) -> list[sp.Expr]:
    # positive terms first reads better: a - b rather than -b + a
    terms = list(e.as_ordered_terms())
    return sorted(terms, key=lambda t: t.could_extract_minus_sign())


def delta_terms(e: sp.Expr) -> list[sp.Expr]:
    """``e`` as a sum of terms, each with its Kronecker deltas as factors: products are
    multiplied out over the sums that hold a delta, and only those.

    ``g (delta(i, 1) a + delta(i, 2) b)`` is ``[g delta(i, 1) a, g delta(i, 2) b]``, while a
    factor free of deltas keeps the shape the simplifier gave it: ``(1 - s) q`` multiplied out
    is ``q - s q``, which at a saturated s = 1.0 is a difference of large terms rounded, where
    the product is 0 exactly (fuzz ``--windows`` 12538, a second derivative of
    ``sigmoid(cosh(u))`` off by 1e-8 where the truth is 0). Equal terms are collected, as
    ``expand_mul`` collects them: ``a delta - a delta`` is no update at all."""
    return list(sp.Add.make_args(sp.Add(*_delta_products(e))))


def _delta_products(e: sp.Expr) -> list[sp.Expr]:
    if isinstance(e, sp.Add):
        return [t for a in e.args for t in _delta_products(a)]
    if not isinstance(e, sp.Mul) or not e.has(sp.KroneckerDelta):
        return [e]
    terms = [sp.S.One]
    for f in e.args:
        if isinstance(f, sp.Add) and f.has(sp.KroneckerDelta):
            terms = [t * u for t in terms for u in _delta_products(f)]
        else:
            terms = [t * f for t in terms]
    return terms


def split_deltas(expr: sp.Expr, axes: tuple) -> tuple[sp.Expr, list]:
    """expr = plain + sum_t coef_t * delta(axis_t, data_t): the one-hot terms, split off."""
    if not expr.has(sp.KroneckerDelta):
        return expr, []
    plain, picks = sp.S.Zero, []
    for term in delta_terms(expr):
        deltas = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.KroneckerDelta)]
        if not deltas:
            plain += term
            continue
        (d,) = deltas if len(deltas) == 1 else (None,)
        axis = next((x for x in d.args if x in axes), None) if d is not None else None
        data = next((x for x in d.args if isinstance(x, sp.Indexed)), None) if d else None
        if axis is None or data is None:
            raise ValueError(f"unsupported delta term {term}")
        # coef(c) delta(c, t) = coef(t) delta(c, t): the update reads coef where the delta is 1
        picks.append((replace_apart(term / d, {axis: data}), axis, data))
    return sp.factor_terms(plain), picks


def scatter_delta(e: sp.Sum, axes: tuple):
    """``(delta, axis, data)`` of ``sum_B delta(v, t[..]) g``: v a target axis, t read over
    every summed index and, beside them, over other target axes alone (``t[m, b]`` summed
    over b: each row m scattered along v, a ``scatter_add_``); t's subscripts may be any
    expressions in them (``labels[idx[p], p + 2]``: the positions, gathered first, are a
    tensor over p). None for any other sum."""
    bound = {lim[0] for lim in e.limits}
    for f in sp.Mul.make_args(e.function):
        if isinstance(f, sp.KroneckerDelta):
            axis = next((x for x in f.args if x in axes and x not in bound), None)
            data = next((x for x in f.args if isinstance(x, sp.Indexed)), None)
            if axis is None or data is None or data.has(axis):
                continue
            reads = scatter_reads(data, axes, bound)
            if bound <= reads and reads - bound <= set(axes) - {axis}:
                return f, axis, data
    return None


def scatter_reads(data: sp.Indexed, axes: tuple, bound: set) -> set:
    """The target axes and summed indices a scatter's positions ``data`` read."""
    return data.free_symbols & (set(axes) | set(bound))


@dataclass(frozen=True)
class Scope:
    """What a fusion's match may read of the lowering, and nothing it could change: which names
    are bound to python numbers, which sums are computed already, which index ranges are
    known, and the axis order wanted. It answers, without lowering anything, what lowering
    ``e`` would give: over which axes, and whether a python number."""

    scalars: Collection[str]  # the names bound to python numbers (sizes, params)
    computed: Collection[sp.Expr]  # the sums computed already (``e in computed``: Computed)
    ranged: Collection[sp.Symbol] = ()  # the indices whose range is known (an arange's)
    order: tuple[sp.Symbol, ...] = ()
    shared: Collection[sp.Expr] = ()  # canonical keys of the sums the statements read twice
    sizes: Mapping[sp.Symbol, sp.Expr] = field(default_factory=dict)  # index -> its range
    derived: Mapping[sp.Symbol, sp.Expr] = field(default_factory=dict)  # HO -> its definition

    def is_axis(self, i: sp.Expr) -> bool:
        """An index symbol, not a value with a name (a scalar Max's argmax is data)."""
        return isinstance(i, sp.Symbol) and bool(i.is_integer) and i.name not in self.scalars

    def axes(self, e: sp.Expr) -> set[sp.Symbol]:
        """The indices the lowered ``e`` has axes for: the free index symbols its tensors are
        subscripted with, and those a delta or a where() condition compares or it reads as a
        number (an arange over a known range). Told apart by the symbol, not its name: an
        index may share a tensor's name (fuzz 1168)."""
        found = {i for ind in e.atoms(sp.Indexed) for i in ind.indices if self.is_axis(i)}
        for cmp in e.atoms(sp.KroneckerDelta, sp.core.relational.Relational):
            found |= {a for a in cmp.args if self.is_axis(a) and a in self.ranged}
        labels = {x.base.label for x in e.atoms(sp.Indexed)}
        for x in _affine_parts(e):  # x[n, t + 2*k - P], where(t - k >= 0, ..): t and k
            found |= {a for a in x.free_symbols - labels if self.is_axis(a) and a in self.ranged}
        # an index read as a number, (q + q1) beside a sum over q1 (fuzz --windows 13174: a
        # contraction planned without q lost it)
        found |= {a for a in free_indices(e) if self.is_axis(a) and a in self.ranged}
        return found & e.free_symbols

    def scalar(self, e: sp.Expr) -> bool:
        """Whether ``e`` lowers to a python number: it reads no tensor, only sizes and params."""
        if e.has(sp.Indexed, sp.Sum, sp.KroneckerDelta):
            return False
        return all(s.name in self.scalars for s in e.free_symbols if isinstance(s, sp.Symbol))


def _affine_parts(e: sp.Expr) -> list[sp.Expr]:
    """The affine subscripts and compared index expressions of ``e`` (t + 2*k - P), a data
    read among their terms included (``v + cls[h]``: v is an axis as much as h is; left out,
    a contraction planned on these axes summed v away, fuzz 1179), and subscripts held inside
    a range (``clamp(l + 1, 0, L - 1)``: l is an axis of the read, fuzz --windows 9918)."""
    found = [i for ind in e.atoms(sp.Indexed) for i in ind.indices]
    found += [a for c in e.atoms(sp.KroneckerDelta, sp.core.relational.Relational) for a in c.args]
    return [x for x in found if isinstance(x, (sp.Add, sp.Mul, clamp))]


@dataclass(frozen=True)
class PickUpdate:
    """``name[..., data, ...] += coef``: a one-hot term added in place along ``axis``."""

    name: str
    coef: sp.Expr
    axis: sp.Symbol
    data: sp.Indexed
    axes: tuple[sp.Symbol, ...]


def is_gate(f: sp.Expr) -> bool:
    """A factor that selects: a delta, a where() with a 0 branch, or a kink's derivative on
    tensors (Heaviside: relu's, maximum's), or a positive whole power of one (see
    :func:`as_gate`), lowered as a selection, never as a 0/1 mask multiplied in: 0 * inf is
    nan, where autograd's where, threshold and maximum backwards select."""
    f = as_gate(f)
    if isinstance(f, sp.Heaviside):
        return bool(f.atoms(sp.Indexed))
    return isinstance(f, sp.KroneckerDelta) or (isinstance(f, where) and 0 in f.args[1:])


def as_gate(f: sp.Expr) -> sp.Expr:
    """A positive whole power of a gate as the gate it is: ``Heaviside(x, h)**k`` is
    ``Heaviside(x, h**k)`` (1 above 0, 0 below, h**k at 0), ``delta**k`` is ``delta``,
    ``where(c, a, b)**k`` is ``where(c, a**k, b**k)``. A second order of ``relu(x)**1.5``
    holds relu's step squared beside ``relu(x)**(-1/2)``; taken for a number, the square was
    multiplied in, 0 * inf = nan at x <= 0 where torch's threshold backward selects 0, and a
    fusion that skips gates (addcmul) took it too (found by probing). ``f`` where it is no
    such power."""
    if not (isinstance(f, sp.Pow) and f.exp.is_Integer and f.exp > 0):
        return f
    base, k = f.base, f.exp
    if isinstance(base, sp.Heaviside):
        at_zero = base.args[1] if len(base.args) > 1 else sp.Rational(1, 2)
        return sp.Heaviside(base.args[0], at_zero**k)
    if isinstance(base, sp.KroneckerDelta):
        return base
    if isinstance(base, where):
        c, a, b = base.args
        return where(c, a**k, b**k)
    return f
