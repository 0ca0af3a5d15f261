"""Lowering of data-dependent indexing: gathers and equality masks.

In: index expressions whose subscripts hold data (``C[X[n, t], e]``, ``x[n, t[n]]``,
``x[i, i]``, ``delta(c, t[n])``) and the lowering's context; out: IR nodes that print as
torch ``index_select`` / ``gather`` / advanced indexing and masks ``(a == b)``. The
statements that build a tensor and update it in place (``index_add_``, ``scatter_add_``,
``x[...] += v``) are :mod:`derive.lower.assign`'s.
"""

from __future__ import annotations

import sympy as sp

from derive.errors import DerivationError
from derive.functions import clamp
from derive.ir import nodes as ir
from derive.lower import bounds
from derive.lower.context import Context, as_ints
from derive.lower.value import align, position, union
from derive.lower.windows import window_read
from derive.symbolic.indices import symbols_outside_entries


def mask(cx: Context, e: sp.KroneckerDelta, order: list[sp.Symbol]) -> ir.Node:
    """delta(a, b) -> (a == b): an equality mask over the axes of a and b."""
    a, b = (index_value(cx, x, order) for x in e.args)
    axes = union([a.axes, b.axes], order)
    equal = ir.Binary("==", align(a, axes), align(b, axes), axes=axes)
    return ir.Cast(equal, cx.like, axes=axes)


def index_value(cx: Context, x: sp.Expr, order: list[sp.Symbol]) -> ir.Node:
    """An index as a value: a plain index is arange over its range, an affine subscript
    (``2*t + k - P``) the aranges of its indices, scaled and added."""
    if cx.is_axis(x) and x in cx.sizes:
        return arange(cx, x, cx.sizes[x])
    if is_affine(x) and not isinstance(x, clamp):
        return affine_value(cx, x, order)
    with cx.indexing():
        return cx.value(x, order)


def affine_value(cx: Context, e: sp.Expr, order: list[sp.Symbol]) -> ir.Node:
    """sum_i c_i i + c_0 -> c_i * arange(I)[..] + ... + c_0, broadcast over the indices; a
    term of int data (the adjoint of a window's Max reads t - argmax[t]) is added as read."""
    with cx.indexing():
        return _affine(cx, e, order)


def _affine(cx: Context, e: sp.Expr, order: list[sp.Symbol]) -> ir.Node:
    e = sp.expand(e)
    data = sp.Add(*[t for t in sp.Add.make_args(e) if t.has(sp.Indexed, clamp)])
    e -= data
    at = position(order)
    indices = sorted((s for s in e.free_symbols if cx.is_axis(s)), key=lambda s: (at(s), s.name))
    terms, rest = [], e  # (sign, value)
    for i in indices:
        coef = e.coeff(i)
        if _reads_axes(cx, coef):
            # a product of indices (a*t, (a - t)**2 expanded): its terms are no arange of i
            # scaled by a number; left in the rest, lowered whole, broadcast over both axes.
            # Taken as a coefficient, t's arange was laid along a's axis: a crash, or where
            # the sizes agree a wrong comparison (fuzz --windows 15992, a maximum's adjoint)
            coef = sp.Add(*[t for t in sp.Add.make_args(coef) if not _reads_axes(cx, t)])
        if coef == 0:
            continue
        rest -= coef * i
        part = arange(cx, i, cx.sizes[i])
        part = part if coef == 1 else ir.Binary("*", part, cx.value(coef, []), axes=(i,))
        terms.append(("+", part))
    for term, term_order in ((sp.expand(rest), order), (data, order)):
        if term != 0:
            neg = term.could_extract_minus_sign()
            terms.append(("-" if neg else "+", cx.value(-term if neg else term, term_order)))
    axes = union([v.axes for _, v in terms], order)
    sign, first = terms[0]
    total = align(first, axes) if sign == "+" else ir.Neg(align(first, axes), axes=axes)
    for sign, v in terms[1:]:
        total = ir.Binary(sign, total, align(v, axes), axes=axes)
    return total


def _reads_axes(cx: Context, e: sp.Expr) -> bool:
    return any(cx.is_axis(s) for s in e.free_symbols)


def clamped(cx: Context, e: clamp, order: list[sp.Symbol]) -> ir.Node:
    """clamp(v, lo, hi) -> v.clamp(lo, hi), or v where its indices' ranges keep it inside."""
    v, lo, hi = e.args
    ranges = {
        a: (sp.S.Zero, cx.sizes[a] - 1) for a in v.free_symbols if cx.is_axis(a) and a in cx.sizes
    }
    at = index_value(cx, v, order)
    if within(cx, v, ranges, lo, hi):
        return at
    if at.scalar:  # an entry read at a constant, x[n, 1], held in an axis of run-time length
        return _held(at, cx.value(lo, []), cx.value(hi, []))
    return ir.ClampTo(at, cx.value(hi, []), lo=cx.value(lo, []), axes=at.axes)


def _held(at: ir.Node, lo: ir.Node, hi: ir.Node) -> ir.Node:
    """A python int held inside [lo, hi] by python (``.clamp`` is a tensor's)."""
    return ir.Apply("min(max({0}, {1}), {2})", (at, lo, hi))


def digit(cx: Context, e: sp.Expr, order: list[sp.Symbol]) -> ir.Node:
    """A digit of an argmax over several indices, int data: ``floor(a/M) -> a // M``,
    ``Mod(a, M) -> a % M`` (python's and torch's floor division and remainder agree with
    SymPy's for a positive M). Only where no fold removed it (a gather at the argmax)."""
    if isinstance(e, sp.Mod):
        x, m = e.args
        op = "%"
    else:
        x, m = sp.fraction(sp.together(e.args[0]))
        op = "//"
    if not (_reads_data(cx, x) and as_ints(cx, x).is_integer and not _reads_data(cx, m)):
        raise DerivationError(cx.op, f"cannot lower {e}: a floor or Mod of anything but int data")
    v = cx.value(x, order)
    return ir.Binary(op, v, cx.value(m, []), axes=v.axes)


def _reads_data(cx: Context, e: sp.Expr) -> bool:
    """``e`` reads a tensor: an entry of one, or a 0-d one (an argmax over every index of a
    Max to a number, ``s = Max(f(x[j, u]), j, u)``), not only sizes and params."""
    zero_d = {s for s in e.free_symbols if s.name in cx.known and s.name not in cx.scalars}
    return e.has(sp.Indexed) or bool(zero_d - set(cx.sizes))


def is_affine(x: sp.Expr) -> bool:
    """An affine subscript: an expression over indices, plain ones outside any tensor entry
    (x[n, t + 1]; x[t - argmax[t]] in a derived adjoint)."""
    if isinstance(x, (sp.Symbol, sp.Indexed)) or x.is_Number:
        return False
    return any(s.is_integer and not s.is_positive for s in symbols_outside_entries(x))


def is_padded(x: sp.Expr) -> bool:
    """A subscript read with zero padding: any sum or product, an affine subscript or one a
    derivation made of it with data (``Y[argmax - 1]``, from ``Max(x[Y[m - 1]], m)``), which
    may fall outside its axis as the affine read it came from did; or a clamp a derivation
    made into another axis's range (``idx[clamp(1 - b, 0, Q - 1)]`` in a second order, where
    ``Kx[idx[1 - b], 1 - b]`` read column 1 - b: inside Q, not inside idx's I; fuzz
    --windows 12000307 read past idx, an IndexError). Either is read as it is where the
    bounds show it inside the axis (:func:`_inside`)."""
    return isinstance(x, (sp.Add, sp.Mul, clamp))


def padded_part(cx: Context, sub: sp.Expr, size: sp.Expr, order: list) -> tuple:
    """An affine subscript held inside its axis of ``size``, and where it was inside: the
    read is 0 elsewhere (zero padding)."""
    at = affine_value(cx, sub, order)
    hi = cx.value(size - 1, [])
    inside = ir.Binary(
        "&",
        ir.Binary(">=", at, ir.Number(0), axes=at.axes),
        ir.Binary("<=", at, hi, axes=at.axes),
        axes=at.axes,
    )
    if at.scalar:  # 4 + clamp(1, 0, Q - 1), a python int: held by python, masked by a 0-d
        # tensor (a python bool is no where()'s condition; fuzz --windows 12400066)
        return _held(at, ir.Number(0), hi), ir.AsTensor(inside, cx.like)
    return ir.ClampTo(at, hi, axes=at.axes), inside


def within(cx: Context, e: sp.Expr, ranges: dict, lo: sp.Expr, hi: sp.Expr) -> bool:
    """``lo <= e <= hi`` for every value of its indices (``ranges``) and of the int data it
    reads whose range is known (``cx.data_ranges``: a window's own argmax, ``S*i + argmax[i]``
    with ``S*(I - 1) + K - 1 <= H - 1`` where the declared output size makes windows fit).
    Shown, the index needs no clamp and its value no mask; what cannot be shown is False
    (:func:`derive.lower.bounds.interval`)."""
    found = bounds.interval(e, ranges, cx.data_ranges, cx.derived, cx.scalars)
    return (
        found is not None
        and bounds.at_most(lo, found[0], cx.derived, cx.scalars)
        and bounds.at_most(found[1], hi, cx.derived, cx.scalars)
    )


def _inside(cx: Context, sub: sp.Expr, size: sp.Expr) -> bool:
    """``0 <= sub <= size - 1`` over its indices' known ranges (:func:`within`)."""
    ranges = {
        a: (sp.S.Zero, cx.sizes[a] - 1) for a in sub.free_symbols if cx.is_axis(a) and a in cx.sizes
    }
    return within(cx, sub, ranges, sp.S.Zero, size - 1)


def arange(cx: Context, axis: sp.Symbol, size: sp.Expr) -> ir.Node:
    return ir.Arange(cx.value(size, []), cx.like, axes=(axis,))


def gather(cx: Context, base: ir.Node, e: sp.Indexed, order: list[sp.Symbol]) -> ir.Node:
    """x[i, t[i, s], s] or x[i, i]: advanced indexing, one broadcast index per subscript.

    Advanced indexing wraps negative indices, so the data tensors used here are recorded
    (``wrapping``) and their range is checked before every forward.
    """
    parts, masks = [], []
    for pos, sub in enumerate(e.indices):
        apart = cx.is_axis(sub) and sized_apart(cx, sub, e.base.shape[pos])
        if cx.is_axis(sub) and not apart:
            parts.append(arange(cx, sub, e.base.shape[pos]))
            cx.learn([(sub, e.base.shape[pos])], replace=False)
        elif (is_padded(sub) or apart) and _inside(cx, sub, e.base.shape[pos]):
            parts.append(affine_value(cx, sub, order))  # never past the axis: read as it is
        elif is_padded(sub) or apart:
            part, inside = padded_part(cx, sub, e.base.shape[pos], order)
            parts.append(part)
            masks.append(inside)
        else:
            parts.append(cx.value(sub, order))
            cx.note_wrapping(i.base.label.name for i in sub.atoms(sp.Indexed))
    axes = union([p.axes for p in parts], order)
    if axes or all(p.scalar for p in parts):
        parts = [_one_entry(p) if axes else p for p in parts]
        read = ir.Index(base, tuple(align(p, axes) for p in parts), axes=axes)
    else:  # a single entry at a 0-d int tensor (``cls[argmax]``): read as one element, so
        # that no python int is made of it (``.item()``, which torch.compile(fullgraph) and
        # torch.export refuse as a data-dependent value; fuzz 226's second order, probed)
        read = ir.Squeeze(ir.Index(base, tuple(map(_one_entry, parts)), axes=()), 0, axes=())
    for inside in masks:  # zero padding: an affine subscript outside its axis reads 0
        read = ir.Where(align(inside, axes), read, ir.Number(0), axes=axes)
    return read


def _one_entry(part: ir.Node) -> ir.Node:
    """A 0-d int tensor among broadcast indices (``x[arange(N), t[1]]``) as a 1-element one.

    Python indexing reads a 0-d int tensor as a python int (``.item()``), a value torch.export's
    fake tensors cannot know (``GuardOnDataDependentSymNode``); a 1-element tensor is an
    advanced index like the others, and broadcast against them (which hold an axis) it reads
    the same entries."""
    if part.axes or part.scalar:
        return part
    if isinstance(part, ir.Squeeze) and part.dim == 0:  # an entry read as one element already
        return part.arg
    return ir.Unsqueeze(part, 0)


def sized_apart(cx: Context, axis: sp.Symbol, size: sp.Expr) -> bool:
    """An index whose range is known and not shown equal to the size of the axis it reads:
    a derivation put it there (``b2[r, r2 + 1, r2]`` with r2 over z's R and b2's last axis
    V, from the forward's ``b2[kk, f, f - 1]``), and the read is zero past the axis as the
    affine one it came from was. Read as the tensor's own axis, it took b2's V for r2's R: a
    shape mismatch, or a size-1 axis broadcast silently (fuzz --windows 16715)."""
    known = cx.sizes.get(axis)
    if known is None or known == size or sp.expand(known - size) == 0:
        return False
    fits = bounds.at_most(known, size, cx.derived, cx.scalars)
    return not (fits and bounds.at_most(size, known, cx.derived, cx.scalars))


def indexed(cx: Context, e: sp.Indexed, order: list[sp.Symbol]) -> ir.Node:
    base = cx.tensor(e.base.label.name)  # a slice reads in place
    idx = e.indices
    shape = e.base.shape or ()
    if any(cx.is_axis(i) and sized_apart(cx, i, n) for i, n in zip(idx, shape, strict=False)):
        return gather(cx, base, e, order)  # read padded where it passes the axis
    if not all(cx.is_axis(i) or isinstance(i, sp.Indexed) for i in idx):
        view = window_read(cx, base, e)  # x[n, c, S*t + k]: a view of x's windows
        return cx.permuted(view, order) if view is not None else gather(cx, base, e, order)
    if all(isinstance(i, sp.Symbol) for i in idx):
        if len(set(idx)) != len(idx):  # a diagonal, x[i, i]
            return gather(cx, base, e, order)
        return cx.permuted(ir.relabel(base, tuple(idx)), order)
    data = [k for k, i in enumerate(idx) if not isinstance(i, sp.Symbol)]
    plain_rest = set(idx[1:]).isdisjoint(idx[0].free_symbols) and len(set(idx[1:])) == len(idx[1:])
    if (
        data == [0]
        and isinstance(idx[0], sp.Indexed)
        and all(cx.is_axis(i) for i in idx[0].indices)
        and plain_rest
        and len(set(idx[0].indices)) == len(idx[0].indices)
    ):
        return cx.permuted(_rows(cx, base, e), order)
    if data == [len(idx) - 1] and isinstance(idx[-1], sp.Indexed):
        # x[n, t[n]] -> x.gather(1, t[:, None]).squeeze(1)
        pick = cx.value(idx[-1], list(idx[:-1]))
        if pick.axes == tuple(idx[:-1]):
            k = len(idx) - 1
            picked = ir.Gather(base, k, ir.Unsqueeze(pick, k))
            return cx.permuted(ir.Squeeze(picked, k, axes=tuple(idx[:-1])), order)
    return gather(cx, base, e, order)


def _rows(cx: Context, base: ir.Node, e: sp.Indexed) -> ir.Node:
    """C[X[n, t], e] -> C.index_select(0, X): unlike C[X] it rejects negative indices; X is
    read in its stored axis order, so its shape is its declared one."""
    data = e.indices[0]
    pick = ir.relabel(cx.tensor(data.base.label.name), tuple(data.indices))
    axes = pick.axes + tuple(e.indices[1:])
    if len(pick.axes) == 1:
        return ir.IndexSelect(base, pick, axes=axes)
    shape = tuple(cx.value(x, []) for x in data.base.shape + e.base.shape[1:])
    flat = ir.Reshape(pick, (ir.Number(-1),))
    return ir.Reshape(ir.IndexSelect(base, flat), shape, axes=axes)
