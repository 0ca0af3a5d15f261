"""Lowering of a Max over several indices, ``m[I] = Max(f, p, q)``, with or without its argmax.

The argmax is one int per entry, the maximising indices in the mixed radix of
:mod:`derive.language.argmax` (``a = p*M + q``). Two forms, the first that fits:

- a window read ``x[b, c, S*i + p, S*j + q]`` (:func:`~derive.lower.windows.plan_pool`):
  ``m, a = max_pool2d(x.reshape(-1, 1, H, W), K, S, return_indices=True)``, both reshaped back,
  then ``a -= S*i*W + S*j`` (torch's index
  of the maximum in x's plane less the window's origin is ``p*W + q``: one subtraction, no
  division);
- anything else: the body over (I, p, q), its Max indices flattened last, one ``.max`` (or
  ``.amax``) over them; the flat position ``p*Q + q`` (Q the range of q) recoded to the radix
  where that differs.

Both pick the first maximum in row-major order over (p, q), and a NaN is a window's maximum, as
torch's ``max`` and ``max_pool2d`` do.
"""

from __future__ import annotations

import sympy as sp

from derive.errors import DerivationError
from derive.ir import nodes as ir
from derive.language import ReduceMax
from derive.language.argmax import radices
from derive.lower.context import Context, lowers_to_int
from derive.lower.equalities import carrier_of, is_checked, segment, spare_index
from derive.lower.indexing import affine_value, arange
from derive.lower.select import safe_indices, slice_constants
from derive.lower.value import align, permute, position
from derive.lower.windows import plan_pool, pool_value


def reduce_max_many(
    cx: Context, name: str, body: ReduceMax, axes: tuple, argmax: str | None, text: str
) -> None:
    """``name[axes] = Max(f, p, q, ..)``, and its argmax into ``argmax`` unless None."""
    bound = tuple(lim[0] for lim in body.limits)
    cx.learn_limits(body.limits)
    pool = plan_pool(cx, body.function, body.limits, axes) if argmax is not None else None
    if pool is not None:  # x's planes as a batch: the results back in the definition's shape
        shape = tuple(cx.size(a) for a in axes)
        cx.emit(ir.Assign((name, argmax), pool_value(cx, pool)))
        cx.emit(ir.Assign((name,), ir.Reshape(ir.Ref(name), shape, axes=axes)))
        origin = align(affine_value(cx, pool.origin, list(axes)), axes)
        index = ir.Reshape(ir.Ref(argmax), shape, axes=axes)
        cx.emit(ir.Assign((argmax,), ir.Binary("-", index, origin, axes=axes)))
        return
    function = safe_indices(cx, slice_constants(cx, body.function))
    value = cx.value(function, list(axes) + list(bound))
    if not set(bound) <= set(value.axes):
        raise DerivationError(cx.op, "Max over an index the body does not use", text)
    kept = tuple(a for a in value.axes if a not in bound)
    if argmax is None:
        dims = tuple(value.axes.index(v) for v in bound)
        cx.emit(ir.Assign((name,), ir.Reduce("amax", value, dims, axes=kept)))
        return
    ordered = permute(value, kept + bound)
    extents = tuple(hi - lo + 1 for _, lo, hi in body.limits)
    # the bound axes as one, sized by number: -1 is ambiguous where a kept size is 0
    shape = tuple(cx.size(a) for a in kept) + (cx.value(sp.Mul(*extents), []),)
    flat = ir.Reshape(ordered, shape, axes=kept + bound[:1])
    recode = radices(body) != extents[1:]
    raw = cx.fresh(f"{argmax}_flat") if recode else argmax
    cx.emit(ir.Assign((name, raw), ir.Reduce("max", flat, (len(kept),), axes=kept)))
    if recode:
        cx.emit(ir.Assign((argmax,), _recoded(cx, ir.Ref(raw, axes=kept), extents, body)))


def segment_max(cx: Context, name: str, body: ReduceMax, axes: tuple, argmax: str | None) -> bool:
    """``m[g, r] = Max(where(k[e] == g, A[e, r], -inf), e)``, a segment's maximum (a graph
    attention's softmax over each node's edges), as one ``scatter_reduce`` of A's rows at k:
    O(E R), where the where() laid out over (G, R, E) was 36x autograd's time on a GAT layer
    and 511x on the maximum alone (found surveying). Emitted, and True, where ``body`` is
    that Max; False, and nothing emitted, for any other.

    Its argmax is the dense form's, exactly: the first e whose entry equals the maximum (a
    NaN matches a NaN maximum, the first NaN as torch's ``max`` picks it), found as the
    least such e by a second ``scatter_reduce``; 0 where the maximum is -inf (an empty
    segment, or one of -inf only: every e ties there, and the dense form's first is 0). An
    entry of k outside g's axis matches no g; it goes to a spare row, cut off after."""
    if len(body.limits) != 1 or body.limits[0][1] != 0:
        return False
    e = body.limits[0][0]
    for g in axes:
        found = segment(cx, body.function, g)
        if found is None or g not in cx.sizes:
            continue
        k, a = found
        rest = [x for x in axes if x != g]
        order = [e, *rest]
        reads = {x for x in (k.free_symbols | a.free_symbols) if x in cx.sizes}
        carrier = carrier_of(cx, k)
        if a.has(g) or e not in k.free_symbols or not reads <= set(order) or carrier is None:
            continue
        if lowers_to_int(cx, a) or not a.free_symbols & set(order):
            continue  # int entries (the dense form's where() makes them floats), or a number
        size = cx.sizes[g]
        spare = not is_checked(cx, k, size)
        at = spare_index(cx, k, carrier, size) if spare else k
        shape = tuple(cx.size(x) for x in order)
        source = _laid(cx.value(a, order), order, shape)
        with cx.indexing():
            index = _laid(cx.value(at, order), order, shape)
        rows = (cx.value(size + 1 if spare else size, []),) + shape[1:]
        empty = ir.Full(rows, ir.Number(-sp.oo), cx.like)
        full = ir.ScatterReduce(empty, 0, index, source, "amax", axes=(g, *rest))
        top = cx.fresh(f"{name}_rows") if spare else name
        cx.emit(ir.Assign((top,), full))
        top = ir.Ref(top, axes=(g, *rest))
        value = ir.Narrow(top, 0, ir.Number(0), cx.size(g)) if spare else top
        cx.emit(ir.Assign((name,), permute(value, axes)))
        if argmax is not None:
            like = ir.Ref(at.base.label.name)  # int64, as the argmax
            first = _segment_argmax(cx, top, rows, index, like, source)
            cx.emit(ir.Assign((argmax,), first))
            if spare:
                cx.emit(
                    ir.Assign((argmax,), ir.Narrow(ir.Ref(argmax), 0, ir.Number(0), cx.size(g)))
                )
            if (g, *rest) != tuple(axes):
                cx.emit(ir.Assign((argmax,), permute(ir.Ref(argmax, axes=(g, *rest)), axes)))
        return True
    return False


def _laid(v: ir.Node, order: list, shape: tuple) -> ir.Node:
    """``v`` over exactly ``order``'s axes, in that order: broadcast along those it lacks."""
    v = permute(v, tuple(sorted(v.axes, key=position(order))))
    if v.axes == tuple(order):
        return v
    return ir.Expand(align(v, tuple(order)), shape, axes=tuple(order))


def _segment_argmax(
    cx: Context, top: ir.Ref, rows: tuple, index: ir.Node, like: ir.Ref, source: ir.Node
) -> ir.Node:
    """The least e whose entry is its segment's maximum (``top``, a row per segment), 0
    where that maximum is -inf: :func:`segment_max`'s argmax."""
    axes = source.axes
    at = ir.Gather(top, 0, index, axes=axes)
    same = ir.Binary("==", source, at, axes=axes)
    hit = ir.Binary("|", same, ir.Binary("!=", source, source, axes=axes), axes=axes)
    e = axes[0]
    n = cx.size(e)
    positions = align(arange(cx, e, cx.sizes[e]), axes)  # int64, as the argmax
    firsts = ir.Where(hit, positions, n, axes=axes)
    least = ir.ScatterReduce(ir.Full(rows, n, like), 0, index, firsts, "amin", axes=top.axes)
    empty = ir.Binary("==", top, ir.Number(-sp.oo), axes=top.axes)
    return ir.Where(empty, ir.Number(0), least, axes=top.axes)


def _recoded(cx: Context, raw: ir.Node, extents: tuple, body: ReduceMax) -> ir.Node:
    """``raw``, a position in the radix of the indices' ranges, in the argmax's radix:
    ``sum_k d_k R_k`` with ``d_k = (raw // E_k) % Q_k`` (E_k, R_k the products of the ranges and
    of the radices of the indices after k)."""
    rad, total = radices(body), None
    for k, extent in enumerate(extents):
        below = sp.Mul(*extents[k + 1 :])
        d = raw if below == 1 else ir.Binary("//", raw, cx.value(below, []), axes=raw.axes)
        if k > 0:
            d = ir.Binary("%", d, cx.value(extent, []), axes=raw.axes)
        weight = sp.Mul(*rad[k:])
        if weight != 1:
            d = ir.Binary("*", d, cx.value(weight, []), axes=raw.axes)
        total = d if total is None else ir.Binary("+", total, d, axes=raw.axes)
    return total
