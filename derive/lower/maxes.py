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
from derive.lower.context import Context
from derive.lower.indexing import affine_value
from derive.lower.select import safe_indices, slice_constants
from derive.lower.value import align, permute
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
