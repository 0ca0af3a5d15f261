"""Lowering of data-dependent indexing: gathers, equality masks, one-hot updates.

In: index expressions whose subscripts hold data (``C[X[n, t], e]``, ``x[n, t[n]]``,
``x[i, i]``, ``delta(c, t[n])``) and the lowerer whose state they extend; out: torch
``index_select`` / ``gather`` / advanced indexing, masks ``(a == b)``, and statements that
build a tensor and update it in place (``index_add_``, ``scatter_add_``, ``x[...] += v``).
Functions of the :class:`~derive.lower.lowerer.Lowerer`: they read and extend its statements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy as sp

from derive.lower.value import ATOM, MUL, PickUpdate, Value, align, permute, scatter_delta, union

if TYPE_CHECKING:
    from derive.lower.lowerer import Lowerer


def mask(lw: Lowerer, e: sp.KroneckerDelta, order: list[sp.Symbol]) -> Value:
    """delta(a, b) -> (a == b): an equality mask over the axes of a and b."""
    a, b = (index_value(lw, x, order) for x in e.args)
    axes = union([a.axes, b.axes], order)
    left, right = (align(v, axes).wrap(MUL) for v in (a, b))
    return Value(f"({left} == {right}).to({lw.device_of}.dtype)", axes)


def index_value(lw: Lowerer, x: sp.Expr, order: list[sp.Symbol]) -> Value:
    """An index as a value: a plain index is arange over its range."""
    if lw._is_axis(x) and x in lw.sizes:
        return arange(lw, x, lw.sizes[x])
    return lw.value(x, order)


def arange(lw: Lowerer, axis: sp.Symbol, size: sp.Expr) -> Value:
    code = f"torch.arange({lw.value(size, []).code}, device={lw.device_of}.device)"
    return Value(code, (axis,))


def gather(lw: Lowerer, name: str, e: sp.Indexed, order: list[sp.Symbol]) -> Value:
    """x[i, t[i, s], s] or x[i, i]: advanced indexing, one broadcast index per subscript.

    Advanced indexing wraps negative indices, so the data tensors used here are recorded
    (``wrapping``) and their range is checked before every forward.
    """
    parts = []
    for pos, sub in enumerate(e.indices):
        if lw._is_axis(sub):
            parts.append(arange(lw, sub, e.base.shape[pos]))
            lw.sizes.setdefault(sub, e.base.shape[pos])
        else:
            parts.append(lw.value(sub, order))
            lw.wrapping.update(i.base.label.name for i in sub.atoms(sp.Indexed))
    axes = union([p.axes for p in parts], order)
    return Value(f"{name}[{', '.join(align(p, axes).code for p in parts)}]", axes)


def indexed(lw: Lowerer, e: sp.Indexed, order: list[sp.Symbol]) -> Value:
    name = lw.aliases.get(e.base.label.name, e.base.label.name)  # a slice reads in place
    idx = e.indices
    if not all(lw._is_axis(i) or isinstance(i, sp.Indexed) for i in idx):
        return gather(lw, name, e, order)
    if all(isinstance(i, sp.Symbol) for i in idx):
        if len(set(idx)) != len(idx):  # a diagonal, x[i, i]
            return gather(lw, name, e, order)
        return lw._permuted(Value(name, tuple(idx)), order)
    data = [k for k, i in enumerate(idx) if not isinstance(i, sp.Symbol)]
    plain_rest = set(idx[1:]).isdisjoint(idx[0].free_symbols) and len(set(idx[1:])) == len(idx[1:])
    if (
        data == [0]
        and isinstance(idx[0], sp.Indexed)
        and all(lw._is_axis(i) for i in idx[0].indices)
        and plain_rest
        and len(set(idx[0].indices)) == len(idx[0].indices)
    ):
        # C[X[n, t], e] -> C.index_select(0, X): unlike C[X] it rejects negative indices;
        # X is read in its stored axis order, so its shape is its declared one
        pick = Value(lw.aliases.get(idx[0].base.label.name, idx[0].base.label.name), idx[0].indices)
        axes = pick.axes + tuple(idx[1:])
        if len(pick.axes) == 1:
            return lw._permuted(Value(f"{name}.index_select(0, {pick.code})", axes), order)
        shape = ", ".join(lw.value(x, []).code for x in idx[0].base.shape + e.base.shape[1:])
        flat = f"{pick.wrap(ATOM)}.reshape(-1)"
        code = f"{name}.index_select(0, {flat}).reshape({shape})"
        return lw._permuted(Value(code, axes), order)
    if data == [len(idx) - 1] and isinstance(idx[-1], sp.Indexed):
        # x[n, t[n]] -> x.gather(1, t[:, None]).squeeze(1)
        pick = lw.value(idx[-1], list(idx[:-1]))
        if pick.axes == tuple(idx[:-1]):
            k = len(idx) - 1
            code = f"{name}.gather({k}, {pick.wrap(ATOM)}.unsqueeze({k})).squeeze({k})"
            return lw._permuted(Value(code, tuple(idx[:-1])), order)
    return gather(lw, name, e, order)


def materialise(lw: Lowerer, v: Value, axes: tuple, fresh: bool) -> str:
    """Code for a new tensor with exactly ``axes``; fresh when it will be updated in place."""
    shape = ", ".join(lw._size(a) for a in axes) or "()"  # (): a 0-d tensor, W[1, 2]'s
    like = f"dtype={lw.device_of}.dtype, device={lw.device_of}.device"
    if v.scalar and v.code == "0":
        return f"torch.zeros({shape}, {like})"
    if v.scalar:  # a python number as a tensor of the target's shape (a 0-d one too)
        return f"torch.full({f'({shape},)' if axes else shape}, {v.code}, {like})"
    if v.axes != axes:
        return f"{align(v, axes).wrap(ATOM)}.expand({shape}).clone()"
    if fresh and v.prec == ATOM:
        return f"{v.code}.clone()"
    return v.code


def pick_update(lw: Lowerer, name: str, coef: sp.Expr, axis, data: sp.Indexed, axes: tuple) -> None:
    others = [a for a in axes if a != axis]
    fused = lw.fuse(PickUpdate(name, coef, axis, data, axes), others)
    if fused is not None:
        lw.lines.append(fused)
        return
    index = []
    for a in axes:
        if a == axis:
            index.append(align(lw.value(data, others), tuple(others)).code)
        else:
            aligned = align(
                Value(f"torch.arange({lw._size(a)}, device={name}.device)", (a,)),
                tuple(others),
            )
            index.append(aligned.code)
    sign, coef = ("-", -coef) if coef.could_extract_minus_sign() else ("+", coef)
    value = align(lw.value(coef, others), tuple(others))
    lw.lines.append(f"{name}[{', '.join(index)}] {sign}= {value.code}")


def scatter(lw: Lowerer, name: str, e: sp.Sum, axes: tuple) -> None:
    delta, axis, data = scatter_delta(e, axes)
    bound = [lim[0] for lim in e.limits]
    lw.sizes.update({var: hi - lo + 1 for var, lo, hi in e.limits})
    rest = sp.Mul(*[f for f in sp.Mul.make_args(e.function) if f is not delta])
    others = [a for a in axes if a != axis]
    pos = axes.index(axis)
    src_order = others[:pos] + bound + others[pos:]
    # its axes are src_order's (Lowerer._delta_form checked), in whatever order they came out
    source = permute(lw.value(rest, src_order), tuple(src_order))
    flat = ", ".join(
        [lw._size(a) for a in others[:pos]] + ["-1"] + [lw._size(a) for a in others[pos:]]
    )
    index = lw.value(data, bound)
    shape = ", ".join(lw._size(a) for a in axes)
    dev = f"dtype={lw.device_of}.dtype, device={lw.device_of}.device"
    src = source.code if len(bound) == 1 else f"{source.wrap(ATOM)}.reshape({flat})"
    idx = index.code if len(bound) == 1 else f"{index.wrap(ATOM)}.reshape(-1)"
    lw.lines.append(f"{name} = torch.zeros({shape}, {dev}).index_add_({pos}, {idx}, {src})")
