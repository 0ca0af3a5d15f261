"""Lowering of sums: a contraction of plain tensors becomes a matmul or one einsum
(:class:`~derive.ir.nodes.Matmul`, :class:`~derive.ir.nodes.Contract`), a convolution one
:class:`~derive.ir.nodes.Conv` (:mod:`derive.lower.windows`), a triangular sum one
:class:`~derive.ir.nodes.Cumsum` (:mod:`derive.lower.scans`), any other Sum a
:class:`~derive.ir.nodes.Reduce` over the lowered body.

In: ``Sum(body, limits)`` and the lowering's context; out: an IR node naming a temporary bound
once per distinct sum (alpha-equal sums share it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import sympy as sp

from derive.errors import DerivationError
from derive.functions import clamp, where
from derive.ir import nodes as ir
from derive.lower.context import Context, lowers_to_int
from derive.lower.indexing import indexed
from derive.lower.logged import logged_exps
from derive.lower.memo import canonical
from derive.lower.scans import plan_scan, scan_value
from derive.lower.select import slice_constants
from derive.lower.value import (
    Scope,
    align,
    filled,
    is_gate,
    matmul,
    natural_order,
    permute,
    plain,
    position,
    stem,
)
from derive.lower.windows import Window, flattened, plan_window, window_value
from derive.symbolic.indices import free_indices, without
from derive.symbolic.simplify import EXPAND_TERMS, expanded_terms, polynomial


def counted(e: sp.Sum) -> sp.Expr:
    """``e`` with the limits its body does not read counted out: sum_k c = K c, the
    simplifier's own rule (a fold may write back a definition's unsimplified sum:
    Sum(a1[w, s] + 1, s) lowers as Sum(a1) + Sum(1, s); a parse may cancel the terms that
    read k: Sum(W[s] - W[s] + c[g], s) is Sum(c[g], s))."""
    constant = [lim for lim in e.limits if not e.function.has(lim[0])]
    if not constant:
        return _factored_out(e)
    rest = [lim for lim in e.limits if lim not in constant]
    extent = sp.Mul(*[hi - lo + 1 for _, lo, hi in constant])
    return extent * (sp.Sum(e.function, *rest) if rest else e.function)


def _factored_out(e: sp.Sum) -> sp.Expr:
    """``sum_k c f(k) = c sum_k f(k)`` for a factor c free of the summed indices (the
    simplifier's own rule, which a forward as written never went through): an index read
    as a number beside the sum's tensors, ``sum_m o prob[m]``, is no axis of any tensor the
    sum reads, and the sum's value lost it (fuzz --windows 13072, an engine error)."""
    bound = {lim[0] for lim in e.limits}
    outside, inside = [], []
    for f in sp.Mul.make_args(e.function):
        if not f.free_symbols & bound:  # a number too: scaled once, not per summed entry
            outside.append(f)
            continue
        out, f = _out_of_gate(f, bound)
        outside += out
        inside.append(f)
    if not outside:
        return e
    return sp.Mul(*outside) * sp.Sum(sp.Mul(*inside), *e.limits)


def _read(a: sp.Expr) -> bool:
    """A read of a tensor (at any subscripts) or a 0-d tensor: no function of one."""
    return isinstance(a, sp.Indexed) or (isinstance(a, sp.Symbol) and not a.is_integer)


def _out_of_gate(f: sp.Expr, bound: set) -> tuple[list, sp.Expr]:
    """``where(c, a g, 0) = a where(c, g, 0)`` for a factor a free of the summed indices
    (through nested gates): the factors that may stand outside the sum, and what stays. A
    range guard on the summed index kept a product of a tensor over other axes inside, a
    temporary over both (fuzz --affine 4130, --windows 15073). Reads of tensors only: a
    function of one (``exp(s)``) may be inf where the gate is shut, and ``inf * 0`` is nan
    where the gated sum was 0."""
    if not (isinstance(f, where) and f.args[2] == 0):
        return [], f
    out, branch = _out_of_gate(f.args[1], bound)
    factors = sp.Mul.make_args(branch)
    free = [a for a in factors if _read(a) and not a.free_symbols & bound]
    if not free and not out:
        return [], f
    kept = list(factors)
    for a in free:
        kept = without(kept, a)
    rest = sp.Mul(*kept)
    return out + free, where(f.args[0], rest, 0)


def _pair_computed(cx: Context, e: sp.Sum) -> sp.Sum:
    """``e`` with two of its tensors, and the indices only they read, summed apart where the
    function computes that sum anyway (computed already, or read twice elsewhere, so
    :func:`_flattened` keeps it): ``sum_{e,m,f} g[n, m] W2[e, f, m] h[n, e, f]`` is ``sum_{e,f}
    (sum_m g W2)[n, e, f] h[n, e, f]`` where two other gradients read ``sum_m g W2`` (a
    mixture of experts' backward made that N x E x F product twice, once inside a
    three-tensor einsum; found probing)."""
    factors, limits = [], {lim[0]: lim for lim in e.limits}
    for f in sp.Mul.make_args(e.function):  # a nested sum of tensors taken in, its indices apart
        parts = sp.Mul.make_args(f.function) if isinstance(f, sp.Sum) else (f,)
        if isinstance(f, sp.Sum) and all(plain(p) for p in parts):
            if {lim[0] for lim in f.limits} & (
                set(limits) | e.function.free_symbols - f.free_symbols
            ):
                return e
            limits.update((lim[0], lim) for lim in f.limits)
        factors.extend(parts)
    if len(factors) < 3 or not all(plain(f) for f in factors):
        return e
    for i, j in itertools.combinations(range(len(factors)), 2):
        # by position: a read met twice (a[n, d] outside and inside a nested sum) is two
        rest = [f for k, f in enumerate(factors) if k not in (i, j)]
        others = set().union(*(f.free_symbols for f in rest))
        own = [x for x in limits if x in (factors[i].free_symbols | factors[j].free_symbols)]
        own = [x for x in own if x not in others]
        left = [limits[x] for x in limits if x not in own]
        if not own or not left:
            continue
        pair = sp.Sum(factors[i] * factors[j], *[limits[x] for x in own])
        if canonical(pair)[0] not in cx.shared_sums and cx.recall(pair) is None:
            continue  # not computed for certain: an order chosen at the call may skip it
        return sp.Sum(sp.Mul(*rest) * pair, *left)
    return e


def sum_value(cx: Context, e: sp.Sum, order: list[sp.Symbol], name: str | None = None) -> ir.Node:
    if (whole := counted(e)) is not e:
        return cx.value(whole, order)
    known = cx.recall(e)
    if known is not None:
        return cx.permuted(known, order)
    written = e  # remembered as written: an assignment reads it back so
    if (picked := _picked(e)) is not e:  # a constant subscript: a view
        return _bound(cx, written, cx.value(slice_constants(cx, picked), order), order, name)
    e = _padded_under_gates(_tabulated(cx, e))
    if cx.logged and isinstance(e.function, sp.Mul):  # before a contraction takes it apart
        body = e.function
        while isinstance(body, sp.Mul) and (taken := logged_exps(cx, body)) is not body:
            body = taken
        e = sp.Sum(body, *e.limits) if body is not e.function else e
    e = _pair_computed(cx, e)
    bound = [lim[0] for lim in e.limits]
    cx.learn_limits(e.limits)
    inner = natural_order(e.function, order)
    order_in = list(dict.fromkeys(list(order) + inner))
    value = _partly_known(cx, e)
    if value is None and (late := _gathered_late(cx, e, order_in)) is not None:
        value = cx.value(late, order_in)
    if value is None and (lags := _at_every_lag(cx, e, order_in)) is not None:
        value = cx.value(lags, order_in)
    if value is None and (first := _summed_before_read(cx, e)) is not None:
        value = cx.value(first, order_in)
    scan = plan_scan(cx.scope(order_in), e) if value is None else None
    if scan is not None:  # a triangular sum: one cumsum (derive/lower/scans.py)
        value = scan_value(cx, scan, order_in)
    window = plan_window(cx.scope(order_in), e) if value is None and not _toeplitz(cx, e) else None
    if window is not None:  # a convolution: one torch kernel (derive/lower/windows.py)
        value = window_value(cx, window)
    if value is None and not _toeplitz(cx, e) and (named := _named_for_a_window(cx, e)):
        value = window_value(cx, named)
    if value is None:
        value = _window_among(cx, e, order_in)
    if value is None:
        selected = _functions_apart(cx, _gates_onto_overflows(cx, _gates_apart(cx, e)))
        plan = plan_contraction(cx.scope(order_in), selected.function, bound, order_in)
        split = None if plan is not None else _split_for_width(cx.scope(order_in), selected)
        if plan is not None:
            value = contract(cx, plan, order_in)
        elif split is not None:
            value = cx.value(split, order_in)
        else:
            value = _summed(cx, selected.function, bound, inner, selected)
    return _bound(cx, written, value, order, name)


def _bound(cx: Context, written: sp.Sum, value: ir.Node, order: list, name: str | None) -> ir.Node:
    """The sum as ``written``, its ``value`` bound to a name of its own (remembered: an
    alpha-equal sum reads it), read in ``order``."""
    name = name or cx.fresh("sum_" + stem(written))
    cx.emit(ir.Assign((name,), value))
    cx.remember(written, ir.Ref(name, axes=value.axes))
    return cx.permuted(ir.Ref(name, axes=value.axes), order)


def _padded_under_gates(e: sp.Sum) -> sp.Sum:
    """``where(a >= 0, where(a <= n - 1, sum_o g[.., o] w[.., clamp(a, 0, n - 1)], 0), 0)`` as
    ``sum_o g[.., o] w[.., a]``: where the gates say a is inside w's axis of n entries and the
    body is a product of plain reads (under its sums) with that one read of w as a factor,
    the language's padding (a read outside an axis is 0) makes the body 0 where the gates
    would: equal, and a window's read a convolution matches. An intermediate's adjoint read
    at a shifted subscript comes so (a weight-standardised conv2d's dx, ``ws`` read at
    ``clamp(h - h1 + 1, 0, KH - 1)`` under its two gates, was a dense Toeplitz gather over
    (H, H, W, W): 34 GB asked for at (32, 64, 64, 64), found probing)."""
    for _ in range(8):  # innermost first: an outer gate's read is a factor once inner ones go
        found = {g: v for g in e.atoms(where) if (v := _unclamped(g)) is not None}
        if not found:
            return e
        e = e.xreplace(found)
    return e


def _picked(e: sp.Sum) -> sp.Expr:
    """``sum_j where(j == c, A, 0) B = (A B)(j = c)`` for a number c in j's range: the term
    the equality picks, a slice, where the where() over j's axis and its sum were two passes
    over the whole tensor (RoPE's rotate-half adjoint, ``sum_j where(j == 0, -g[.., j, i],
    0)``, found surveying). Over a range of two numbers, ``j != c`` picks the other one.
    Equal: the other terms are 0 (a selection, not a product: no 0 * inf)."""
    for f in sp.Mul.make_args(e.function):
        if not isinstance(f, where) or 0 not in f.args[1:]:
            continue
        cond, a, b = f.args
        if not isinstance(cond, (sp.Eq, sp.Ne)):
            continue
        equal = isinstance(cond, sp.Eq) == (b == 0)
        for j, lo, hi in e.limits:
            diff = sp.expand(cond.lhs - cond.rhs)
            k = diff.coeff(j)
            c = -(diff - k * j) / k if k in (1, -1) else None
            if c is None or not c.is_Integer or not (lo.is_Integer and hi.is_Integer):
                continue
            if not lo <= c <= hi:
                continue
            if not equal:
                others = [v for v in range(int(lo), int(hi) + 1) if v != c]
                if len(others) != 1:
                    continue
                c = sp.Integer(others[0])
            if any(j in {lim[0] for lim in s.limits} for s in e.function.atoms(sp.Sum)):
                continue  # j bound again inside: not this j there
            branch = a if b == 0 else b
            body = sp.Mul(*[g for g in sp.Mul.make_args(e.function) if g is not f], branch)
            body = body.xreplace({j: c})
            rest = [lim for lim in e.limits if lim[0] != j]
            return sp.Sum(body, *rest) if rest else body
    return e


def _tabulated(cx: Context, e: sp.Sum) -> sp.Sum:
    """``f(clamp(a, 0, n - 1), ..)`` as ``tab[clamp(a, 0, n - 1), ..]`` with ``tab[u, ..] =
    f(u, ..)`` computed once over the clamps' ranges: where a function reads the indices only
    through clamped subscripts (a kernel computed from its taps, ``exp(-(p - R)**2 / 2 s**2)``,
    whose adjoint reads it at ``p = clamp(R + h - h1, 0, K - 1)``), it is a table of n
    entries read at a shifted subscript, as a kernel tensor would be, and the gates around it
    pad the read (:func:`_padded_under_gates`): a convolution's kernel. Computed where it
    stood, it was a dense table over every pair (h, h1) and (w, w1), a Gaussian blur's dx 253x
    autograd's time (found surveying). Equal everywhere: the table holds f at each value the
    clamp takes."""
    tables: dict[sp.Expr, sp.Expr] = {}

    def walk(f: sp.Expr) -> sp.Expr:
        if not isinstance(f, sp.Expr) or f.is_Atom or isinstance(f, sp.Indexed):
            return f
        clamps = sorted(f.atoms(clamp), key=sp.default_sort_key)
        if not clamps or isinstance(f, clamp) or f.atoms(sp.Indexed, sp.Sum):
            return f.func(*map(walk, f.args)) if f.args and f.atoms(clamp) else f
        if f.is_integer:  # index arithmetic (2*clamp(j, 0, V - 1)): a table would be read as
            return f  # a float, and the expression may serve as a subscript (found by the fuzz)
        axes = {s for s in f.free_symbols if cx.is_axis(s)}
        taps = [c for c in clamps if not any(c in o.args[0].atoms(clamp) for o in clamps)]
        stand = {c: sp.Dummy(integer=True) for c in taps}
        ranged = all(c.args[1] == 0 and not c.args[2].free_symbols & axes for c in taps)
        if not ranged or axes & f.xreplace(stand).free_symbols:
            return f.func(*map(walk, f.args))
        if f not in tables:
            us = [sp.Symbol(f"_tap{len(cx.sizes)}_{k}", integer=True) for k in range(len(taps))]
            cx.learn((u, c.args[2] + 1) for u, c in zip(us, taps))
            body = f.xreplace(dict(zip(taps, us)))
            tables[f] = _as_read(cx, body, us, "tab_").xreplace(dict(zip(us, taps)))
        return tables[f]

    function = walk(e.function)
    return e if function == e.function else sp.Sum(function, *e.limits)


def _named_for_a_window(cx: Context, e: sp.Sum) -> Window | None:
    """The convolution ``e`` is once its element-wise work is named apart: ``sum_m x[n, c + m
    - P]**2`` is a window sum of ``t = x**2`` read at ``c + m - P``, and ``sum_c1 where(0 <= c
    - c1 + P <= S - 1, F[n, c1], 0)`` a window indicator over ``t = F`` (a local response
    norm's channel window, forward and adjoint; found surveying: the adjoint a dense C x C
    band over (N, C, H, W, C), 2.2x autograd's time and 8.4x its memory). The window rules
    match a tensor read, so the summand's element-wise work, one product, is tried as a read
    (:func:`_read_of_work`, a stand-in, nothing emitted) and a where()'s conditions as
    indicator factors; where a rule then matches, the work is computed over its own axes.
    A shifted read pads with zeros, so work over one must be 0 at a read of 0 (``x**2``, not
    ``exp(x)``). Equal: the window's pairs (t, l) are the where()'s, so the kernel sums
    the entries the where() selects and no other."""
    flat = flattened(e)
    if flat is None:
        return None
    scope = cx.scope([])
    factors, limits = flat
    gates, work = [], []
    for f in factors:
        while isinstance(f, where) and f.args[2] == 0 and f.args[1] != 1:
            conds = f.args[0].args if isinstance(f.args[0], sp.And) else (f.args[0],)
            gates += [where(c, 1, 0) for c in conds]
            f = f.args[1]
        (gates if isinstance(f, where) and f.args[1:] == (1, 0) else work).append(f)
    f = sp.Mul(*work)
    stand = _read_of_work(cx, f)
    if stand is None or plan_window(scope, sp.Sum(sp.Mul(stand, *gates), *limits)) is None:
        return None
    subs = stand.indices
    if all(cx.is_axis(i) for i in subs) and len(set(subs)) == len(subs):
        read = _as_read(cx, f, list(subs), "t_")
    else:  # reads at one shifted tuple: the work over their tensor's own axes, read there
        us = [sp.Symbol(f"_at{len(cx.sizes)}_{k}", integer=True) for k in range(len(subs))]
        cx.learn(zip(us, stand.base.shape))
        body = f.xreplace({r: r.base[tuple(us)] for r in f.atoms(sp.Indexed)})
        read = _as_read(cx, body, us, "t_").xreplace(dict(zip(us, subs)))
    return plan_window(scope, sp.Sum(sp.Mul(read, *gates), *limits))


STAND_IN = "_stand_in"  # a read only matched against the window rules, never emitted


def _read_of_work(cx: Context, f: sp.Expr) -> sp.Indexed | None:
    """A stand-in read for ``f``, element-wise work (:func:`_named_for_a_window`): over its
    free indices where every read outside its sums is at plain ones, or over the tensor
    its reads share where they are all at one shifted subscript tuple; else None."""
    reads = f.atoms(sp.Indexed)
    if isinstance(f, sp.Indexed) or not reads or f.has(clamp) or lowers_to_int(cx, f):
        return None
    if is_gate(f) and not _on_params(cx, f):
        return None
    inner = set().union(*(x.atoms(sp.Indexed) for x in f.atoms(sp.Sum)))
    outer = reads - inner
    if all(plain(r) and len(set(r.indices)) == len(r.indices) for r in outer):
        axes = [x for x in natural_order(f, []) if x in free_indices(f) and x in cx.sizes]
        if not axes or set(axes) != {x for x in free_indices(f) if cx.is_axis(x)}:
            return None
        shape = tuple(cx.sizes[x] for x in axes)
        return sp.IndexedBase(STAND_IN, shape=shape, real=True)[tuple(axes)]
    if inner or len({r.indices for r in reads}) != 1:
        return None
    r, *_ = sorted(reads, key=sp.default_sort_key)
    if len({x.base.shape for x in reads}) != 1 or not r.base.shape:
        return None
    stand = {x: sp.Dummy(real=True) for x in reads}
    if any(x in cx.sizes for x in f.xreplace(stand).free_symbols):
        return None  # f reads an index beside its reads (a kernel's taps): not their entry
    if f.xreplace({x: 0 for x in reads}) != 0:
        return None  # the read pads with zeros: f must be 0 there too
    return sp.IndexedBase(STAND_IN, shape=r.base.shape, real=True)[r.indices]


def _on_params(cx: Context, f: sp.Expr) -> bool:
    """A where() whose condition reads params alone (``beta == 0``): a choice made per call,
    no mask over any axis."""
    if not isinstance(f, where):
        return False
    cond = f.args[0]
    return not cond.atoms(sp.Indexed) and not any(x in cx.sizes for x in cond.free_symbols)


def _unclamped(g: where) -> sp.Expr | None:
    conds, body = [], g
    while isinstance(body, where) and body.args[2] == 0:
        conds.append(body.args[0])
        body = body.args[1]
    if len(conds) != 2:
        return None
    inner = body
    while isinstance(inner, sp.Sum):
        inner = inner.function
    factors = sp.Mul.make_args(inner)
    for c in body.atoms(clamp):
        a, lo, hi = c.args
        if lo != 0 or set(conds) != {sp.Ge(a, 0), sp.Le(a, hi)}:
            continue
        reads = [r for r in body.atoms(sp.Indexed) if c in r.indices]
        if len(reads) != 1 or reads[0] not in factors:
            continue
        r = reads[0]
        pos = r.indices.index(c)
        if sp.expand(hi + 1 - r.base.shape[pos]) != 0:
            continue
        others = [f for f in factors if f is not r]
        if not all(f.is_number or (plain(f) and not f.has(clamp)) for f in others):
            continue
        return body.xreplace({r: r.base[tuple(a if i == c else i for i in r.indices)]})
    return None


def _functions_apart(cx: Context, e: sp.Sum) -> sp.Sum:
    """``sum_i x[n, i]**2 V[i, k]**2`` as ``sum_i a[n, i] b[i, k]`` with ``a = x**2`` and
    ``b = V**2`` each computed over its own axes: where two or more factors are element-wise
    work over different axes (:func:`_laid_out`), each is named apart, and the sum is a
    contraction of the names (``(x * x) @ (V * V)``). Grouped into one element-wise factor,
    they were a broadcast product over every index of the sum, (N, I, K): a factorization
    machine 1.78x autograd's time and 5.6x its memory; a GLU's ``dW1 = sum_n (s4[n, e] +
    s5[n, e]) relu(h[n, d])``, its two sums' adjoints beside an activation, 3.1x and 39x
    (both found probing). A factor computed already (the sums' adjoint, which dh reads too)
    is read by its name. A gate (a where() with a 0 branch, a kink's step) and a function that
    may overflow stay where they are (the selection or the product decides them)."""
    from derive.lower.arithmetic import may_overflow  # arithmetic imports this module

    scope = cx.scope([])
    alone = []
    for f in sp.Mul.make_args(e.function):
        if not _composite(scope, f) or is_gate(f) or f.has(sp.KroneckerDelta):
            continue
        if not may_overflow(cx, f) and (axes := _laid_out(cx, f)) is not None:
            alone.append((f, axes))
    if len({frozenset(axes) for _, axes in alone}) < 2:
        return e
    named = {f: _as_read(cx, f, axes, "t_") for f, axes in sorted(alone, key=_first_key)}
    return sp.Sum(e.function.xreplace(named), *e.limits)


def _first_key(pair: tuple) -> tuple:
    return sp.default_sort_key(pair[0])


def _as_read(cx: Context, f: sp.Expr, axes: list[sp.Symbol], prefix: str) -> sp.Indexed:
    """``f`` as one tensor read over ``axes``: the name that holds it already (a sum names
    itself), read in that name's order, or a fresh name bound to it now."""
    known = cx.recall(f)
    if known is None and isinstance(f, sp.Sum):
        known = cx.value(f, axes)
        known = known.arg if isinstance(known, ir.Permute) else known
    if isinstance(known, ir.Ref) and set(known.axes) == set(axes):
        label, axes = known.name, list(known.axes)
    else:
        label = cx.fresh(prefix + stem(f))
        cx.emit(ir.Assign((label,), cx.permuted(cx.value(f, axes), axes)))
        cx.remember(f, ir.Ref(label, axes=tuple(axes)))
    shape = tuple(cx.sizes[a] for a in axes)
    return sp.IndexedBase(label, shape=shape, real=True)[tuple(axes)]


def _laid_out(cx: Context, f: sp.Expr) -> list[sp.Symbol] | None:
    """The axes element-wise work ``f`` is computed over, in the order its widest read
    stores them (its only read's, for a function of one tensor); None where a read is not at
    plain, distinct indices (a window, a gather, a diagonal) or an index of f is no tensor's
    (a mask's): the work is not one tensor over f's own axes."""
    reads = f.atoms(sp.Indexed)
    if not all(plain(r) and len(set(r.indices)) == len(r.indices) for r in reads):
        return None
    axes = {i for i in f.free_symbols if cx.is_axis(i)}
    if not axes or not axes <= set().union(*(r.indices for r in reads)) or axes - set(cx.sizes):
        return None
    return [a for a in natural_order(f, []) if a in axes]


def _gates_onto_overflows(cx: Context, e: sp.Sum) -> sp.Sum:
    """``sum_k where(c, a, 0) f g`` as ``sum_k F g`` with ``F = where(c, a f, 0)`` a tensor of
    its own, where ``f`` may overflow (a tensor the forward defines as exp, cosh, sinh or
    expm1) and the gate (a mask of indices, or a gated read ``where(t2 <= t, x[n, t2], 0)``)
    reads only f's axes: the gate selects f before the contraction rather than multiplying
    into it as a 0/1 matrix or with the gate's other masks over a wider product.

    A contraction hosts such a mask on one tensor that covers all its axes (:func:`_grouped`);
    where no one tensor covers them (``where(t <= t2, 1, 0) where(t1 <= t2, 1, 0) g[n, t2]
    e[n, t, t2]``: a second order of a gated recurrence, ``e = exp(c[t] - c[t2])`` inf at t2 <
    t where the forward's causal where() never read it), the masks were one float tensor in a
    matmul, and ``0 * inf`` is nan; ``where(t1 <= t2, 1, 0) where(t2 <= t, x[n, t2], 0) e[n,
    t2, t]`` was grouped whole, a temporary over (n, t, t1, t2). ``F`` is on f's axes, so the
    contraction keeps autograd's width (the other masks still contract as floats, now beside
    a finite tensor). Equal as real numbers; ``e`` itself where nothing applies."""
    from derive.lower.arithmetic import may_overflow  # arithmetic imports this module

    factors = list(sp.Mul.make_args(e.function))
    masks = [f for f in factors if isinstance(f, where) and f.args[2] == 0 and f.free_symbols]
    changed = False
    for mask in masks:
        host = next(
            (
                f
                for f in factors
                if plain(f)
                and len(set(f.indices)) == len(f.indices)
                and may_overflow(cx, f)
                and _indices_of(cx, mask) <= set(f.indices)
            ),
            None,
        )
        if host is None:
            continue
        axes = list(host.indices)
        selected = where(mask.args[0], mask.args[1] * host, 0)
        known = cx.recall(selected)
        if isinstance(known, ir.Ref) and set(known.axes) == set(axes):
            label, axes = known.name, list(known.axes)
        else:
            label = cx.fresh("selected_" + host.base.label.name)
            cx.emit(ir.Assign((label,), cx.permuted(cx.value(selected, axes), axes)))
            cx.remember(selected, ir.Ref(label, axes=tuple(axes)))
        shape = tuple(cx.sizes[a] for a in axes)
        factors.remove(mask)
        factors[factors.index(host)] = sp.IndexedBase(label, shape=shape, real=True)[tuple(axes)]
        changed = True
    return sp.Sum(sp.Mul(*factors), *e.limits) if changed else e


def _gates_apart(cx: Context, e: sp.Sum) -> sp.Sum:
    """``sum_s where(c, a x[b, s], 0)`` as ``sum_s where(c, a, 0) x[b, s]`` where the gate c
    reads indices alone (``s <= t``) and x is a tensor read: the gate is then a factor of
    indices (a, ``gamma**(t - s)``), computed once over (t, s) and contracted with x (a
    matmul, :func:`_grouped`), where the gate over the whole product was a (B, T, T)
    temporary (found probing: a discounted sum 39x autograd's time, 341x its memory); or,
    where a reads tensors too, a tensor over a's axes, when x holds an index a lacks
    (:func:`_apart_from`). A tensor that may overflow stays under its gate
    (:func:`_gates_onto_overflows`: ``inf * 0`` is nan where the gate is shut); any other
    read is finite there."""
    from derive.lower.arithmetic import may_overflow  # arithmetic imports this module

    factors = list(sp.Mul.make_args(e.function))
    changed = False
    for k, f in enumerate(factors):
        if isinstance(f, sp.Sum):  # a nest the contraction may flatten: its gates apart too
            # (a decay's gradient, sum grad_out sum_s where(s <= t, f(t - s) a v, 0), flattened
            # with the gate over a and v, was a (B, T, T, D) product: 16x autograd's time)
            factors[k] = _gates_apart(cx, f)
            changed |= factors[k] is not f
            continue
        if not (isinstance(f, where) and f.args[2] == 0) or f.args[0].atoms(sp.Indexed):
            continue
        inside = list(sp.Mul.make_args(f.args[1]))
        reads = [
            a for a in inside if plain(a) and not lowers_to_int(cx, a) and not may_overflow(cx, a)
        ]
        rest = sp.Mul(*[a for a in inside if a not in reads])
        if not reads or (rest.atoms(sp.Indexed) and not _apart_from(cx, rest, reads)):
            continue
        factors[k] = sp.Mul(where(f.args[0], rest, 0), *reads)
        changed = True
    return sp.Sum(sp.Mul(*factors), *e.limits) if changed else e


def _apart_from(cx: Context, rest: sp.Expr, reads: list[sp.Expr]) -> bool:
    """Whether the reads a gate lets go of hold an index the work left under it lacks:
    ``where(s <= t, g[h]**(t - s) S[b, h, t, s], 0)`` is then a tensor over its own (b, h,
    t, s), contracted with ``v[b, h, s, d]`` (a retention layer's forward was the (B, H, T,
    T, D) product of all three under the gate)."""
    kept = _indices_of(cx, rest)
    return any(_indices_of(cx, r) - kept for r in reads)


def _indices_of(cx: Context, e: sp.Expr) -> set[sp.Symbol]:
    """The index symbols ``e`` reads, in its subscripts, conditions and numbers; a name bound
    to a python number (a size, a param) is none."""
    return {s for s in e.free_symbols if cx.is_axis(s)}


def _gathered_late(cx: Context, e: sp.Sum, order: list[sp.Symbol]) -> sp.Expr | None:
    """``sum_b f(b, p(t, r), t)`` as ``F[p(t, r), t]`` with ``F[u, t] = sum_b f(b, u, t)``:
    where free indices (r) reach the sum only through one position p, the sum is taken at
    every position u and read at p after, a gather of its result. Read first, the gather
    runs inside the sum, every tensor the body reads at p taken over the free indices beside
    the summed ones: a relative-position table's adjoint, ``sum_{b, t} dsc[b, t - r + T - 1,
    t]`` through a softmax, read ``grad_out[b, clamp(..), d]`` under its sum over d, a (B,
    T, 2T - 1, D) gather where ``grad_out @ v^T`` is (B, T, T) (found probing, 101x
    autograd's time); relative keys' scores, ``sum_d q[b, t, d] R[t - s + T - 1, d]``, a
    (B, T, T, D) product where ``q @ R^T`` is (B, T, 2T - 1).

    The positions u are no more than the problem has: a clamp held in [0, hi] by numbers or
    sizes, ``hi + 1`` the size of a free or summed index; or a subscript of the body's
    factors at an axis of that size, or at a table's axis read at an offset between two
    indices (``t - s``: the table holds every offset). An unclamped position is read as the
    language reads one, 0 outside the axis, so it must be a subscript of a factor (the
    product is 0 there too). The indices it removes are read nowhere else. None otherwise."""
    at = position(order)
    free = sorted(free_indices(e), key=lambda a: (at(a), str(a)))
    summed = [lim for s in e.atoms(sp.Sum) for lim in s.limits]
    sizes = [cx.sizes[a] for a in free if a in cx.sizes] + [hi - lo + 1 for _, lo, hi in summed]
    for p, extent in _positions(cx, e, sizes):
        rest = e.xreplace({p: sp.Dummy()}).free_symbols
        gone = [a for a in free if a in p.free_symbols and a not in rest]
        if not gone or not _contracted_at(e, p):
            continue
        u = sp.Symbol(cx.fresh("at"), integer=True)
        whole = e.xreplace({p: u})
        axes = [u if a == gone[0] else a for a in free if a not in gone[1:]]
        cx.learn([(u, extent)])
        total = cx.value(whole, axes)
        if isinstance(total, ir.Ref) and total.axes == tuple(axes):
            label = total.name
        else:
            label = cx.fresh("sum_" + stem(e))
            cx.emit(ir.Assign((label,), cx.permuted(total, axes)))
        dims = tuple(cx.sizes[a] for a in axes)
        return sp.IndexedBase(label, shape=dims, real=True)[tuple(p if a == u else a for a in axes)]
    return None


def _contracted_at(e: sp.Sum, p: sp.Expr) -> bool:
    """Whether a read at ``p`` meets, under a sum of ``e``, a tensor read that does not read
    ``p`` and has an index of its own, over an index the sum binds (``sum_d grad_out[b, p,
    d] v[b, t, d]``): gathered at p first, that contraction is a broadcast product over p's
    indices and d, where taken at every position it is a matmul. Otherwise (``sum_b g[b, t]
    x[b, t, p]``, a dot per entry either way) it is no cheaper taken at every position, and a
    table of few offsets (T >> TT) made it T / TT times the work (1.56x autograd's time
    against 0.96x, found probing). Two reads at p with an index of its own each, over an index
    the sum binds (``sum_b dsc[b, p, t] q[b, p, d]``), are a matmul at each position, a batched
    one taken at every position: a kept adjoint of relative keys' scores read along its
    diagonals, gathered first, was a (TT, D, B, T) product (4.9x the time)."""
    for s in [e, *e.function.atoms(sp.Sum)]:
        bound = {lim[0] for lim in s.limits}
        reads = [f for f in sp.Mul.make_args(s.function) if isinstance(f, sp.Indexed)]
        at = [r for r in reads if p in r.indices]
        off = [r for r in reads if not r.has(p)]
        for a, o in itertools.product(at, off):
            if set(a.indices) & set(o.indices) & bound and set(o.indices) - set(a.indices) - bound:
                return True  # a matmul's shape: each side has an index of its own
        for a, o in itertools.combinations(at, 2):
            own = set(a.indices) - set(o.indices) - bound, set(o.indices) - set(a.indices) - bound
            if set(a.indices) & set(o.indices) & bound and all(own):
                return True  # two reads at p, each with an index of its own: a matmul per p
    return False


def _positions(cx: Context, e: sp.Sum, sizes: list[sp.Expr]) -> list[tuple[sp.Expr, sp.Expr]]:
    """The positions :func:`_gathered_late` may take a sum at, each with its extent: clamps,
    then subscripts of the body's factors, in a fixed order."""

    def known(n: sp.Expr) -> bool:
        return any(sp.expand(n - m) == 0 for m in sizes)

    found = []
    for c in sorted(e.atoms(clamp), key=sp.default_sort_key):
        _, lo, hi = c.args
        if lo == 0 and not any(cx.is_axis(s) for s in hi.free_symbols) and known(hi + 1):
            if c.free_symbols <= e.free_symbols:
                found.append((c, hi + 1))
    factors = sp.Mul.make_args(e.function)
    reads = [f for f in factors if isinstance(f, sp.Indexed) and f.base.shape]
    subs = {
        (sub, f.base.shape[k])
        for f in reads
        for k, sub in enumerate(f.indices)
        if not sub.is_Symbol and not sub.atoms(sp.Indexed, clamp) and sub.free_symbols
    }
    for sub, extent in sorted(subs, key=sp.default_sort_key):
        if not sub.free_symbols <= e.free_symbols or any(
            sub in f.indices and f.base.shape[f.indices.index(sub)] != extent for f in reads
        ):
            continue
        if any(f.has(sub) for f in factors if not (f in reads and sub in f.indices)):
            continue  # read other than as a subscript of a factor: not 0 outside the axis
        if known(extent) or _offset(cx.scope([]), sub):
            found.append((sub, extent))
    return found


def _at_every_lag(cx: Context, e: sp.Sum, order: list[sp.Symbol]) -> sp.Expr | None:
    """``sum_{b,t,d} g[b, t, d] v[b, t - r + T - 1, d]`` as ``sum_t F[t, t - r + T - 1]``
    with ``F[t, s] = sum_{b,d} g[b, t, d] v[b, s, d]``: a correlation of two signals of one
    length T at every lag r (a table of offsets' gradient) is one matmul and a sum along
    its diagonals, where a convolution runs B D one-channel rows with a kernel as long as
    the signal (80% of a Toeplitz product's time, found probing). The lag's read is centred
    on the summed index's range, as a table of offsets is (:func:`_offset`); the inner sum
    is then gathered late (:func:`_gathered_late`). None for any other sum."""
    bound = {lim[0]: lim for lim in e.limits}
    if len(bound) < 2:
        return None
    for r in sp.Mul.make_args(e.function):
        if not isinstance(r, sp.Indexed):
            return None
    scope = cx.scope([])
    for r in sp.Mul.make_args(e.function):
        for sub in r.indices:
            pair = _centred(scope, sub) or _lag(scope, sub, bound)
            if pair is None or pair[0] not in bound or pair[1] in bound:
                continue
            t = pair[0]
            inner = [lim for var, lim in bound.items() if var != t]
            read = _gathered_late(cx, sp.Sum(e.function, *inner), [t, *order])
            return None if read is None else sp.Sum(read, bound[t])
    return None


def _lag(scope: Scope, sub: sp.Expr, bound: dict) -> tuple[sp.Symbol, sp.Symbol] | None:
    """``(t, r)`` of a subscript ``t + r - (T - 1)``, t summed over T and r free: a table of
    offsets' adjoint read back along the offsets, ``dsc[b, t + r - T + 1, t]`` (the delta of
    ``R[t - s + T - 1]`` solved for the other index than :func:`_centred`'s form has it).
    A kernel's taps, ``x[t + k - (K - 1)]``, are a convolution's, not lags. None otherwise."""
    if sub.is_Symbol or sub.atoms(sp.Indexed):
        return None
    axes = [a for a in sub.free_symbols if scope.is_axis(a)]
    summed = [a for a in axes if a in bound]
    if len(axes) != 2 or len(summed) != 1 or summed[0] not in scope.sizes:
        return None
    (t,) = summed
    (r,) = [a for a in axes if a != t]
    if sp.expand(sub - t - r + scope.sizes[t] - 1) != 0:
        return None
    return t, r


def _toeplitz(cx: Context, e: sp.Sum) -> bool:
    """A sum over a table of offsets read at ``t - s + c`` (``sum_s tab[t - s + T - 1]
    v[b, s, d]``): the table laid out over (t, s) once, then a matmul, where a convolution
    would run a one-channel kernel as long as the signal (38x autograd's time, whose
    ``tab[idx] @ v`` is the same product; found probing)."""
    scope = cx.scope([])
    return any(
        _offset(scope, sub)
        for r in sp.Mul.make_args(e.function)
        if isinstance(r, sp.Indexed)
        for sub in r.indices
        if not sub.is_Symbol and not sub.atoms(sp.Indexed)
    )


def _offset(scope: Scope, sub: sp.Expr) -> bool:
    """``t - s + T - 1``: a table of every offset between two indices of one range T,
    centred (offset 0 at T - 1), so its 2T - 1 entries are as many as the offsets. A
    convolution's taps read at ``t - s + K - 1`` are a kernel of K taps, not such a table:
    there a one-channel convolution is the cheaper kernel."""
    pair = _centred(scope, sub)
    return pair is not None and sp.expand(scope.sizes[pair[0]] - scope.sizes[pair[1]]) == 0


def _centred(scope: Scope, sub: sp.Expr) -> tuple[sp.Symbol, sp.Symbol] | None:
    """``(t, r)`` of a subscript ``t - r + T - 1``, T the range of t: two indices, one up and
    one down, the offset 0 at T - 1 (:func:`_offset`'s table; :func:`_at_every_lag`'s lags,
    r over the table's own range). None for any other subscript."""
    if sub.is_Symbol or sub.atoms(sp.Indexed):
        return None
    axes = [a for a in sub.free_symbols if scope.is_axis(a)]
    if len(axes) != 2 or not all(a in scope.sizes for a in axes):
        return None
    if not sub.is_polynomial(*axes) or sp.Poly(sub, *axes).total_degree() != 1:
        return None
    ups = [a for a in axes if sub.coeff(a) == 1]
    downs = [a for a in axes if sub.coeff(a) == -1]
    if len(ups) != 1 or len(downs) != 1:
        return None
    (up,), (down,) = ups, downs
    if sp.expand(sub - up + down - (scope.sizes[up] - 1)) != 0:
        return None
    return up, down


def _summed_before_read(cx: Context, e: sp.Sum) -> sp.Expr | None:
    """``sum_g x[p(q, r), g]`` as ``s[p(q, r)]`` with ``s[i] = sum_g x[i, g]``: a read at
    positions over more axes than it has subscripts (a gather or a window) summed over the
    tensor's own axes is summed first, then read. Read first, the positions times the summed
    axis were a temporary a degree wider than the problem (fuzz --affine 4119: x[q + 1 - 2 r,
    g] summed over g, a (Q, Q, G) gather where x.sum(1) is Q). None for any other sum."""
    coef, product = e.function.as_coeff_Mul()
    reads = sp.Mul.make_args(product)
    f = reads[0]  # reads at the same subscripts, x[..] or a product g[..] * out[..]
    if not all(isinstance(r, sp.Indexed) and r.base.shape for r in reads):
        return None
    if any(r.indices != f.indices for r in reads):
        return None
    bound = [lim[0] for lim in e.limits]
    # the summed indices that are a subscript of their own, once, and read nowhere else: a
    # sum of the tensor's own axes, taken first; the rest stay summed over what it leaves
    # (sum_{b,t} g[b, t + u, t]: g summed over b, then its diagonals read, B times fewer
    # entries gathered: a relative-position table's adjoint, found probing, 27x autograd's)
    own = [
        b
        for b in bound
        if list(f.indices).count(b) == 1 and sum(sub.has(b) for sub in f.indices) == 1
    ]
    summed = [k for k, sub in enumerate(f.indices) if sub in own]
    kept = [k for k in range(len(f.indices)) if k not in summed]
    at = [f.indices[k] for k in kept]
    rest = [lim for lim in e.limits if lim[0] not in own]
    if not own or not at or all(sub.is_Symbol for sub in at):
        return None
    axes = {a for sub in at for a in sub.free_symbols if cx.is_axis(a)}
    gathered = any(sub.has(sp.Indexed) for sub in at)  # at data (x[idx[n], g]), not affine
    if not rest and gathered and len(axes) <= len(at):
        return None  # the positions are no wider than the rows they read
    for var, lo, hi in e.limits:  # the whole axis: a sum of the tensor's own
        if var in own and (lo != 0 or sp.expand(hi + 1 - f.base.shape[f.indices.index(var)])):
            return None
    limits = [lim for lim in e.limits if lim[0] in own]
    if any(r.base.shape[k] != f.base.shape[k] for r in reads for k in range(len(f.indices))):
        return None
    rows = [sp.Symbol(f"{f.base.label.name}_row{k}", integer=True) for k in range(len(kept))]
    dims = [f.base.shape[k] for k in kept]
    cx.learn(zip(rows, dims, strict=True))
    subs = list(f.indices)
    for k, row in zip(kept, rows, strict=True):
        subs[k] = row
    whole = sp.Mul(*[r.base[tuple(subs)] for r in reads])
    total = cx.value(sp.Sum(whole, *limits), rows)
    if isinstance(total, ir.Ref) and total.axes == tuple(rows):
        label = total.name
    else:
        label = cx.fresh("sum_" + "_".join(sorted({r.base.label.name for r in reads})))
        cx.emit(ir.Assign((label,), cx.permuted(total, rows)))
    read = coef * sp.IndexedBase(label, shape=tuple(dims), real=True)[tuple(at)]
    return sp.Sum(read, *rest) if rest else read


def _window_among(cx: Context, e: sp.Sum, order: list[sp.Symbol]) -> ir.Node | None:
    """A sum of a product that reads a tensor other than plainly (a gather, a window), where
    the rules for two tensors do not match the whole (:mod:`derive.lower.windows`,
    :func:`_summed_before_read`):

    - ``sum_{h,k} f[.., h] g[.., h, k] = sum_h f[.., h] (sum_k g[.., h, k])``: a factor free
      of some summed indices stands outside their sum (the one it is free of most), when the
      factors inside read a tensor other than plainly at those indices (plain reads are a
      contraction einsum plans whole); the inner sum is then a convolution, or a sum before
      a gather;
    - ``sum_l g[b, l] u[b, l - p] X[o, t - s*l] = sum_l Y[b, l] X[o, t - s*l]`` with ``Y = g
      u`` computed first (over its own indices, each a subscript of the sum's): the factors
      beside the one affine read, as one tensor, where that is a convolution.

    Lowered whole instead, the product is a temporary over every index of the sum, the
    windows' and the gathered axes' included: a degree wider than the problem (fuzz
    --windows 15148, a second order's ``grad_y * u`` beside a strided kernel read; 15164,
    ``r[z, b] * x[tgt[z], b, t]`` summed over b and t). None where neither applies."""
    factors = sp.Mul.make_args(e.function)
    if len(factors) < 2 or e.function.has(sp.KroneckerDelta):
        return None
    best = None
    for f in factors:  # a factor outside the sums it does not read
        inner = [lim for lim in e.limits if not f.has(lim[0])]
        if not inner or len(inner) == len(e.limits):
            continue
        others = [g for g in factors if g is not f]
        reads = [r for g in others for r in g.atoms(sp.Indexed) if r.has(*(v for v, *_ in inner))]
        if all(plain(r) for r in reads):
            continue
        if best is None or len(inner) > len(best[1]):
            best = (f, inner, others)
    if best is not None:
        f, inner, others = best
        outer = [lim for lim in e.limits if lim not in inner]
        return cx.value(sp.Sum(f * sp.Sum(sp.Mul(*others), *inner), *outer), order)
    found = _beside_a_window(cx, factors, list(e.limits), order)
    flat = flattened(e) if found is None and e.function.has(sp.Sum) else None
    ranges = [(v, hi - lo + 1) for v, lo, hi in flat[1]] if flat is not None else []
    if flat is not None and all(sp.expand(cx.sizes.get(v, n) - n) == 0 for v, n in ranges):
        cx.learn(ranges)  # the nest's indices, as its sums learn them (the same ranges)
        found = _beside_a_window(cx, flat[0], flat[1], order, bounds_apart=True)
    return found


def _inside_by_reading(mask: sp.Expr, read: sp.Indexed) -> bool:
    """``where(e >= 0, 1, 0)`` or ``where(e <= n - 1, 1, 0)`` beside ``read``, which reads
    at e along an axis of n entries: the language reads 0 outside an axis (its padding), so
    the mask says what the read says (an intermediate's body inlined at a shifted subscript
    carries its range as such masks)."""
    if not (isinstance(mask, where) and mask.args[1:] == (1, 0)):
        return False
    cond = mask.args[0]
    if not isinstance(cond, (sp.GreaterThan, sp.LessThan)):
        return False
    e, bound = cond.args
    for sub, size in zip(read.indices, read.base.shape or (), strict=False):
        if sp.expand(e - sub) != 0:
            continue
        limit = 0 if isinstance(cond, sp.GreaterThan) else size - 1
        if sp.expand(bound - limit) == 0:
            return True
    return False


def _beside_a_window(
    cx: Context,
    factors: tuple | list,
    limits: list,
    order: list[sp.Symbol],
    bounds_apart: bool = False,
) -> ir.Node | None:
    """``sum k Y``: the factors beside the one affine read k, as one tensor Y, where that is
    a convolution; None otherwise. With ``bounds_apart``, factors of indices alone (the
    bounds the nest's sums put on a window's read) stay beside k and Y holds the factors that
    read tensors. Over a nest's factors flattened so, a kernel scaled by a
    per-channel gain, ``sum_{o, h1} g[o] grad_out[n, o, h1] w[o, c, h - h1 + 1]``, is the
    transposed convolution of ``g grad_out``; read as three tensors, its dx was a dense
    Toeplitz gather of w over (H, H, W, W) (a weight-standardised conv2d asked for 34 GB,
    found probing)."""
    scope = cx.scope(order)
    for k in factors:  # the others, one tensor
        if not isinstance(k, sp.Indexed) or plain(k):
            continue
        apart = [g for g in factors if g is not k and bounds_apart and not g.atoms(sp.Indexed)]
        bounds = sp.Mul(*[g for g in apart if not _inside_by_reading(g, k)])
        rest = sp.Mul(*[g for g in factors if g is not k and g not in apart])
        if isinstance(rest, sp.Indexed) or rest == 1:  # the rules for two tensors had them
            continue
        axes = [a for a in natural_order(rest, order) if a in free_indices(rest)]
        if not axes or not all(a in cx.sizes for a in axes) or lowers_to_int(cx, rest):
            continue
        shape = tuple(cx.sizes[a] for a in axes)
        stand_in = sp.IndexedBase("_Y", shape=shape, real=True)[tuple(axes)]
        if plan_window(scope, sp.Sum(bounds * k * stand_in, *limits)) is None:
            continue
        y = _as_read(cx, rest, axes, "prod_")
        return window_value(cx, plan_window(scope, sp.Sum(bounds * k * y, *limits)))
    return None


def _summed(cx: Context, body: sp.Expr, bound: list, inner: list, e: sp.Expr) -> ir.Node:
    """sum over ``bound`` of the element-wise body: ``body.sum(dims)``; a body that lowers to
    a python number (0 where a gate's branches simplify to nothing: ``where(t <= q, 0,
    f(q))`` with f 0 wherever t > q, fuzz 1021352) is that number times the count."""
    value = cx.value(body, inner)
    if value.scalar:  # the same number at every index: a tensor of it over the sum's axes
        axes = tuple(a for a in inner if a in free_indices(e))
        shape = tuple(cx.size(a) for a in axes)
        if not ir.is_number(value, 0):
            limits = [lim for lim in e.limits if lim[0] in bound]
            count = cx.value(sp.Mul(*[hi - lo + 1 for _, lo, hi in limits]), [])
            value = ir.Binary("*", value, count)
        return filled(value, shape, cx.like, axes)
    missing = [b for b in bound if b not in value.axes]
    if missing:
        raise DerivationError(cx.op, f"sum over unused index {missing} in {e}")
    return reduce("sum", value, bound)


def _split_for_width(scope: Scope, e: sp.Sum) -> sp.Expr | None:
    """``sum_k f (a + g h) -> sum_k f a + sum_k f g h`` where the element-wise body would be a
    tensor wider than any it reads, and each term is a product of tensors: contractions then
    (pairwise, by matmul or einsum), where the body is a broadcast product over every index.

    Attention's second order sums ``db_dx[b, t, c] (A + B C + ..)`` with terms over six
    indices (b, h, t, t2, c, d), each a product of tensors of at most four: computed whole it
    is a six-axis temporary per term. Only reads of tensors (and sums of polynomials in them)
    are split, no function of one over the summed indices (one free of them, a function of a
    0-d tensor, stands outside the term's sum): ``f (a + b)`` is then finite only where
    ``f a + f b`` is (an inf or nan among f, a, b makes both non-finite; a split of
    ``exp(s) / cosh(s)`` at s = -inf is ``0 * inf`` where the quotient is 0, regression
    160920). The simplifier's cost
    model decides everything else; this is the lowering's width, which it does not see."""
    body = e.function
    if not any(isinstance(f, sp.Add) for f in sp.Mul.make_args(body)):
        return None
    if expanded_terms(body) > EXPAND_TERMS:
        return None
    terms = sp.Add.make_args(sp.expand_mul(body))
    bound = {lim[0] for lim in e.limits}
    factors = [f for t in terms for f in sp.Mul.make_args(t) if not scope.scalar(f)]
    # a factor free of the summed indices stands outside its term's sum: any function of it
    if not all(_reads_only(f) for f in factors if f.free_symbols & bound):
        return None
    reads = [r for f in factors for r in f.atoms(sp.Indexed)]
    adds = sp.Mul(*[f for f in sp.Mul.make_args(body) if isinstance(f, sp.Add)])
    if len(scope.axes(adds)) <= max(len(set(r.indices)) for r in reads):
        return None  # no wider than a tensor it reads: one element-wise pass is fine
    return sp.Add(*[_summed_apart(t, e.limits) for t in terms])


def _summed_apart(term: sp.Expr, limits: tuple) -> sp.Expr:
    """``sum_k c f(k) = c sum_k f(k)``: what does not depend on the summed indices (numbers,
    sizes, tensors over other indices) stands outside, so the sum is a pure contraction."""
    bound = {lim[0] for lim in limits}
    factors = sp.Mul.make_args(term)
    outside = [f for f in factors if not f.free_symbols & bound]
    inside = [f for f in factors if f.free_symbols & bound]
    return sp.Mul(*outside) * sp.Sum(sp.Mul(*inside), *limits)


def _reads_only(f: sp.Expr) -> bool:
    """A read of a tensor (a 0-d tensor's whole: a real symbol; or at positions, a table
    read at an offset ``R[t - s + T - 1, d]``), such a read under a gate of indices alone
    (``where(s <= t, R[..], 0)``: 0 where the gate is shut, never a product with one), or a
    sum of a polynomial in such reads (``sum_n (x[n] - mean) g[n]``: no function of one)."""
    if isinstance(f, sp.Sum):
        return polynomial(f.function, lambda g: g.is_number or _reads_only(g))
    if isinstance(f, where) and f.args[2] == 0 and not f.args[0].atoms(sp.Indexed):
        return _reads_only(f.args[1])
    if isinstance(f, sp.Indexed):
        return plain(f) or all(not sub.atoms(sp.Indexed) for sub in f.indices)
    return isinstance(f, sp.Symbol) and not f.is_integer


def reduce(kind: str, value: ir.Node, bound: list) -> ir.Reduce:
    """``value`` summed (or averaged) over the axes ``bound``."""
    dims = tuple(value.axes.index(b) for b in bound)
    return ir.Reduce(kind, value, dims, axes=tuple(a for a in value.axes if a not in bound))


def _partly_known(cx: Context, e: sp.Sum) -> ir.Node | None:
    """sum_{b,t,t1} f with sum_t1 f computed already (dq, then dbq = sum_{b,t} dq): the
    remaining indices are summed off the known tensor, not the whole body again."""
    limits = list(e.limits)
    for size in range(len(limits) - 1, 0, -1):
        for part in itertools.combinations(limits, size):
            known = cx.recall(sp.Sum(e.function, *part))
            if known is not None:
                return reduce("sum", known, [lim[0] for lim in limits if lim not in part])
    return None


@dataclass(frozen=True)
class Contraction:
    """A sum of a product that is one contraction: which factors meet over which axes."""

    factors: tuple[sp.Expr, ...]  # plain tensors, sums (einsum operands), the grouped product
    bound: tuple[sp.Symbol, ...]
    out: tuple[sp.Symbol, ...]  # the result's axes, in the order wanted
    matmul: bool  # two plain matrices that meet over one axis: ``a @ b``
    ranges: tuple[tuple[sp.Symbol, sp.Expr], ...] = ()  # the nested sums' indices taken in
    grouped: sp.Expr | None = None  # an element-wise factor computed once first (:func:`_grouped`)


def plan_contraction(scope: Scope, body: sp.Expr, bound: list, order: list) -> Contraction | None:
    """sum_k A[.., k] B[k, ..] -> A @ B (or an einsum), when body is two plain tensors;
    a product of three or more tensors (or reductions) -> pairwise contractions in a chosen
    order (:func:`pairwise`), never the broadcast product of all of them; an element-wise
    factor beside tensors -> that factor computed once, then contracted (:func:`_grouped`).
    Pure: decided on the factors' indices, nothing lowered."""
    coef, rest = body.as_coeff_Mul()
    factors = sp.Mul.make_args(rest)
    if any(_composite(scope, f) or _of_indices(scope, f) for f in factors):
        return _grouped(scope, body, bound, order)
    if coef != 1 or len(factors) < 2:
        return None
    return _planned(scope, factors, bound, order)


def _planned(
    scope: Scope, factors: tuple, bound: list, order: list, grouped: sp.Expr | None = None
) -> Contraction | None:
    einsum = len(factors) > 2 or any(isinstance(f, sp.Sum) for f in factors)

    def operand(f: sp.Expr) -> bool:
        return _tensor_read(scope, f) or f is grouped or (einsum and isinstance(f, sp.Sum))

    if not all(operand(f) for f in factors):
        return None  # element-wise work first: not a pure contraction
    if not all(scope.is_axis(i) for f in factors if plain(f) for i in f.indices):
        return None
    ranges = ()
    if einsum:
        factors, bound, ranges, taken = _flattened(scope, factors, bound, grouped)
        grouped = grouped if taken is None else taken
    axes = [tuple(dict.fromkeys(f.indices)) if plain(f) else _axes(scope, f) for f in factors]
    every = {a for ax in axes for a in ax}
    if einsum and not set(bound) <= every:
        return None
    if not einsum:
        shared = set(axes[0]) & set(axes[1])
        if not set(bound) <= shared and set(bound) <= every:
            # an index of one side alone is summed too: sum_{b,t,c} W[h,d,c] g[b,t,c], one einsum
            einsum = True
        elif not set(bound) <= shared or not set(axes[0]) - shared or not set(axes[1]) - shared:
            return None
    out = tuple(x for x in order if x in every - set(bound))
    mm = not einsum and matmul(_side(axes[0]), _side(axes[1]), bound, out) is not None
    return Contraction(factors, tuple(bound), out, mm, ranges, grouped)


def _side(axes: tuple) -> ir.Node:
    """A stand-in operand over ``axes``: the plan asks only whether a matmul fits."""
    return ir.Ref("_", axes=axes)


def _axes(scope: Scope, f: sp.Expr) -> tuple[sp.Symbol, ...]:
    """A sum's or the grouped factor's axes (their order does not matter to the plan)."""
    return tuple(sorted(scope.axes(f), key=str))


def _gathered_or_axis(scope: Scope, i: sp.Expr) -> bool:
    """An index of a grouped factor's reads that the factor, computed once, lays out over its
    own axes: an axis, or int data read at axes (``Emb[idx[n], k]``: rows picked into an
    (n, k) tensor, then ``@ W``; contracted as a broadcast product it was an N x K x M
    temporary, found probing)."""
    if scope.is_axis(i):
        return True
    if not i.atoms(sp.Indexed):  # a table of offsets read at t - s + c: gathered over (t, s)
        return _offset(scope, i)
    return plain(i) and all(scope.is_axis(j) for j in i.indices)


def _composite(scope: Scope, f: sp.Expr) -> bool:
    """A factor that is element-wise work on tensors (not one tensor's read, not a reduction)."""
    return not _tensor_read(scope, f) and not isinstance(f, sp.Sum) and bool(f.atoms(sp.Indexed))


def _tensor_read(scope: Scope, f: sp.Expr) -> bool:
    """One tensor read over axes: at the axes themselves (``W[k, m]``), or at int data read at
    axes (``Emb[idx[n], k]``: one gather lays the picked rows out over (n, k)). Either is an
    operand a contraction takes as it is: two gathers in one product, ``sum_k E[a[n], k]
    F[b[p], k]``, are two gathers and a matmul (a broadcast N x P x K product, found
    probing, when a gathered read counted as element-wise work)."""
    if plain(f):
        return True
    return isinstance(f, sp.Indexed) and all(_gathered_or_axis(scope, i) for i in f.indices)


def _read_at(scope: Scope, f: sp.Expr) -> set:
    """The indices a read (:func:`_tensor_read`) lays its tensor out over."""
    return set(f.indices) if plain(f) else scope.axes(f)


def _of_indices(scope: Scope, f: sp.Expr) -> bool:
    """A factor of indices alone, no tensor's entries: a mask ``where(t2 <= t1, 1, 0)``."""
    return not f.atoms(sp.Indexed) and any(scope.is_axis(i) for i in f.free_symbols)


def _grouped(scope: Scope, body: sp.Expr, bound: list, order: list) -> Contraction | None:
    """sum_k E(..k..) A[k, ..] with E element-wise (a product with sums, differences):
    E is computed once into a tensor of its own axes, then contracted by matmul/einsum.

    The softmax backward inside attention, ``sum_t2 P (dP - rowsum(dP P)) k``, becomes
    ``dS = P * (dP - rowsum)`` and ``dS @ k``: never the broadcast product over all the
    indices at once. E takes the factors that live on its axes (P beside dP - rowsum) and
    the numbers; :func:`contract` remembers it, so dq's and dk's sums share one dS. A factor
    of indices alone (a mask) is applied to the narrowest tensor over its axes: ``sum_t1
    mask[t1, t2] dS[b, h, t1, t2] q[b, h, t1, d]`` is ``(mask * dS)`` contracted with q.
    """
    factors = sp.Mul.make_args(body)
    grouped = [f for f in factors if _composite(scope, f) or not f.atoms(sp.Indexed)]
    axes = {i for f in grouped for i in f.free_symbols if scope.is_axis(i)}
    grouped += [f for f in factors if _tensor_read(scope, f) and _read_at(scope, f) <= axes]
    if any(is_gate(f) for f in grouped):
        # a gate selects what stands on its axes, a sum too: contracted as a 0/1 mask, it
        # multiplies an inf or nan the gate drops (fuzz --range 891045: maximum's derivative
        # beside a sum that overflowed where the other argument was the larger one). A sum
        # grouped already (it reads no tensor) is not grouped twice: the product squared it
        # (fuzz 1140401: an IndexError where it left nothing to contract with)
        grouped += [
            f
            for f in factors
            if isinstance(f, sp.Sum) and scope.axes(f) <= axes and f not in grouped
        ]
    if not any(f.atoms(sp.Indexed) for f in grouped):  # indices alone: onto a tensor
        hosts = [f for f in factors if _tensor_read(scope, f) and axes <= _read_at(scope, f)]
        grouped += [min(hosts, key=lambda f: len(_read_at(scope, f)))] if hosts else []
    if len(grouped) == len(factors):
        return None  # nothing to contract with: an element-wise body summed
    product = sp.Mul(*grouped)
    if not all(_gathered_or_axis(scope, i) for f in product.atoms(sp.Indexed) for i in f.indices):
        return None  # a window's affine subscript inside: the window planner's
    if scope.scalar(product):
        return None
    rest = (product, *[f for f in factors if f not in grouped])
    return _planned(scope, rest, bound, order, grouped=product)


def contract(cx: Context, plan: Contraction, order: list) -> ir.Node:
    """The planned contraction as ``a @ b``, or pair by pair (:func:`pairwise`)."""
    cx.learn(plan.ranges)
    values = [_operand(cx, f, plan, order) for f in plan.factors]
    if plan.matmul:
        mm = matmul(values[0], values[1], list(plan.bound), plan.out)
        if mm is not None:  # a grouped factor's axes came out as planned
            return mm
    return pairwise(values, plan.out, order, lambda e: cx.value(e, []), cx.sizes)


def _operand(cx: Context, f: sp.Expr, plan: Contraction, order: list) -> ir.Node:
    if plain(f):
        return indexed(cx, f, list(f.indices))
    if f is not plan.grouped:
        return cx.value(f, order)
    known = cx.recall(f)  # the grouped factor: one temporary, shared by every sum reading it
    if known is None:
        value = cx.value(f, order)
        known = ir.Ref(cx.fresh("t_" + (stem(f) or "indices")), axes=value.axes)
        cx.emit(ir.Assign((known.name,), value))
        cx.remember(f, known)
    return known


def _flattened(
    scope: Scope, factors: tuple, bound: list, grouped: sp.Expr | None = None
) -> tuple[tuple, list, tuple, sp.Expr | None]:
    """sum_i g[i] sum_j A[i,j] B[j,k] -> sum_{i,j} g[i] A[i,j] B[j,k]: one contraction, so
    :func:`pairwise` may contract g A first (I J + J K) instead of the simplifier's nesting
    (A B first: I J K). A nested sum already computed, or read again elsewhere (shared with
    another gradient: attention's ``sum_c Wo[h, d, c] g[b, t, c]``), stays: computed once.
    One element-wise factor of a nested sum (a ReLU's mask, where the plan has none grouped
    yet) comes out as an operand too, computed once over its axes, and returned: an MLP
    written inline, ``sum_m g[n, m] sum_f H[n, f] W1[d, f] W2[f, m]``, contracted the mask
    with both weights, an N x D x M product, where ``g W2`` first is N x F (found probing:
    58x autograd's time). A read at a window's subscripts is no such factor: its nested sum
    stays, a convolution (a depthwise convolution mixed pointwise in one definition, ``sum_c
    wp[o, c] sum_k x[n, c, t + k - P] wd[c, k]``, was an einsum over x unfolded K times)."""
    flat, bound, ranges, taken = [], list(bound), [], None
    equalities = any(f.has(sp.Eq, sp.KroneckerDelta) for f in factors)
    for f in factors:
        inner = [lim[0] for lim in f.limits] if isinstance(f, sp.Sum) else []
        parts = sp.Mul.make_args(f.function) if inner else ()
        others = set().union(*(g.free_symbols for g in without(factors, f)))
        composite = [p for p in parts if _composite(scope, p)]
        if (
            inner
            and f not in scope.computed
            and canonical(f)[0] not in scope.shared
            and all(
                isinstance(p, sp.Sum)
                or (plain(p) and all(scope.is_axis(i) for i in p.indices))
                or (_gathered_at_axes(scope, p) and not equalities)
                or (
                    p in composite
                    and len(composite) == 1
                    and grouped is None
                    and taken is None
                    and not isinstance(p, sp.Indexed)  # a window's read: the nest is a conv
                )
                for p in parts
            )
            and not set(inner) & (others | set(bound))
        ):
            ranges += [(var, hi - lo + 1) for var, lo, hi in f.limits]
            flat.extend(parts)
            bound.extend(inner)
            taken = composite[0] if composite else taken
        else:
            flat.append(f)
    return tuple(flat), bound, tuple(ranges), taken


def _gathered_at_axes(scope: Scope, p: sp.Expr) -> bool:
    """A read at int data read at axes (``g[dst[e], k, d]``): one gather lays it out over its
    axes, an operand as a plain read is."""
    return (
        isinstance(p, sp.Indexed)
        and not plain(p)
        and all(
            scope.is_axis(i) or (plain(i) and all(scope.is_axis(j) for j in i.indices))
            for i in p.indices
        )
    )


def pairwise(
    values: list[ir.Node],
    out: tuple,
    order: list,
    lower: Callable[[sp.Expr], ir.Node] | None = None,
    sizes: Mapping[sp.Symbol, sp.Expr] | None = None,
) -> ir.Node:
    """Contract two operands at a time, the pair whose result has the fewest axes first.

    torch.einsum contracts its operands left to right, so ``A[i,j] B[j,k] v[k]`` would build
    the I x K product A B before touching v; contracting B v first costs J K + I J instead of
    I J K. Sizes are symbols here, so the rank of an intermediate is the size we can see: the
    pair leaving the fewest axes (those another operand or the output still needs) goes first.
    A plan that is left to right anyway stays one einsum (torch runs it in that order), unless
    every step is a matmul (``a @ b @ c`` reads better).

    Where two first pairs of three operands keep as many axes, only the sizes tell them apart:
    linear attention's ``q[b,t,e] k[b,s,e] v[b,s,d]`` is (q k) v in B T S (E + D) multiplies
    or q (k v) in B E D (S + T), 16x fewer at T = S = 1024, E = D = 64 (found probing: 13.6x
    autograd's time, left to the earliest pair). The orders' multiply counts are compared
    where SymPy can decide them (``lower`` and ``sizes`` given), else at the call
    (:class:`~derive.ir.nodes.Cheaper`: the sizes are python numbers there).
    """
    first = list(values)
    order = list(dict.fromkeys(list(order) + [a for v in first for a in v.axes]))
    tied = _tied_pairs(first, out) if len(first) == 3 and sizes is not None else []
    if len(tied) > 1 and all(a in sizes for v in first for a in v.axes):
        earliest = pairwise(first, out, order)
        return _cheapest_order(first, out, order, tied, earliest, lower, sizes)
    values, in_order, all_matmul = list(first), True, True
    while len(values) > 1:
        i, j, axes = _cheapest_pair(values, out) if len(values) > 2 else (0, 1, out)
        pair = _contract(values[i], values[j], tuple(x for x in order if x in axes), order)
        in_order &= (i, j) == (0, 1)
        all_matmul &= isinstance(pair, ir.Matmul)
        values = [pair if k == i else v for k, v in enumerate(values) if k != j]
    if in_order and not all_matmul:
        return ir.Contract(tuple(first), tuple(order), axes=out)
    return values[0]


def _candidates(values: list[ir.Node], out: tuple) -> list[tuple[int, int, int, list]]:
    """Each pair to contract first: (the axes it keeps, i, j, those axes)."""
    candidates = []
    for i, j in itertools.combinations(range(len(values)), 2):
        needed = set(out).union(*(v.axes for k, v in enumerate(values) if k not in (i, j)))
        axes = [a for a in dict.fromkeys(values[i].axes + values[j].axes) if a in needed]
        candidates.append((len(axes), i, j, axes))
    return candidates


def _cheapest_pair(values: list[ir.Node], out: tuple) -> tuple[int, int, list]:
    return min(_candidates(values, out), key=lambda c: c[:3])[1:]


def _tied_pairs(values: list[ir.Node], out: tuple) -> list[tuple[int, int, list]]:
    """The first pairs that keep the fewest axes, where more than one does."""
    candidates = _candidates(values, out)
    least = min(c[0] for c in candidates)
    return [c[1:] for c in candidates if c[0] == least]


def _cheapest_order(
    values: list[ir.Node],
    out: tuple,
    order: list,
    tied: list,
    earliest: ir.Node,
    lower: Callable[[sp.Expr], ir.Node],
    sizes: Mapping[sp.Symbol, sp.Expr],
) -> ir.Node:
    """Three operands contracted in each tied order, the one of fewest multiplies: chosen
    here where SymPy decides it for every size, else at the call. ``earliest`` is the first
    tied order's contraction as :func:`pairwise` writes it, kept where no order is cheaper."""

    def size(axes) -> sp.Expr:
        return sp.Mul(*[sizes[a] for a in dict.fromkeys(axes)])

    paths, firsts = [], []
    for k, (i, j, axes) in enumerate(tied):
        kept = tuple(x for x in order if x in axes)
        (rest,) = [v for m, v in enumerate(values) if m not in (i, j)]
        cost = size(values[i].axes + values[j].axes) + size(kept + rest.axes)
        met = set(values[i].axes + values[j].axes)
        if k == 0:
            paths.append((cost, earliest))
            firsts.append(met)
            continue
        if met in firsts:  # the same first product: the orders differ in a smaller term
            continue
        firsts.append(met)
        whole = _contract(_contract(values[i], values[j], kept, order), rest, out, order)
        paths.append((cost, whole if whole.axes == out else permute(whole, out)))
    best = paths[0]
    for cost, whole in paths[1:]:
        if (cost - best[0]).is_nonnegative:
            continue
        if (cost - best[0]).is_negative:
            best = (cost, whole)
            continue
        lhs, rhs = _apart(best[0], cost)
        choice = ir.Cheaper(lower(lhs), best[1], lower(rhs), whole, axes=out)
        best = (sp.Min(best[0], cost), choice)
    return best[1]


def _apart(a: sp.Expr, b: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """``(a', b')`` with a' <= b' exactly where a <= b, for positive sizes: the terms both
    share taken off and the common factor divided out (``T <= D``, not ``B D H T**2 + B H
    T**2 <= B D H T**2 + B D H T``)."""
    diff = sp.expand(a - b)
    terms = sp.Add.make_args(diff)
    lhs = sp.Add(*[t for t in terms if not t.could_extract_minus_sign()])
    rhs = -sp.Add(*[t for t in terms if t.could_extract_minus_sign()])
    common = sp.gcd(lhs, rhs)
    if common.is_positive:
        lhs, rhs = sp.cancel(lhs / common), sp.cancel(rhs / common)
    return lhs, rhs


def _contract(a: ir.Node, b: ir.Node, out: tuple, order: list) -> ir.Node:
    bound = [x for x in dict.fromkeys(a.axes + b.axes) if x not in out]
    if not bound and set(a.axes) <= set(out) and set(b.axes) <= set(out):
        # nothing summed: a product, one kernel (an einsum "ac,ac->ac" is a pass of its own
        # through torch's einsum machinery, and reads as a contraction)
        return ir.Binary("*", align(a, out), align(b, out), axes=out)
    mm = matmul(a, b, bound, out) if set(bound) <= set(a.axes) & set(b.axes) else None
    return mm if mm is not None else ir.Contract((a, b), tuple(order), axes=out)
