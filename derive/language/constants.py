"""Definitions that read no tensor: constants of the indices, taken into their readers.

A user names a number that depends only on indices, sizes and params as naturally as any
other step: an average pool's divisor that counts only the entries inside x,

    cnt[t] = Sum(where(stride*t + k - P >= 0, where(stride*t + k - P <= T - 1, 1, 0), 0), k)
    out[n, c, t] = Sum(x[n, c, stride*t + k - P], k) / cnt[t]

ALiBi's slope per head ``slope[h] = 2**(-8*(h + 1)/H)``, a scale ``s = 1/sqrt(D)``. Such a
definition has no adjoint (nothing flows into it) and no tensor for the lowering to compute
it from; written into each definition that reads it, it is an expression of that
definition's indices like ``stride*t + k - P`` itself, which the lowering computes with
``arange``. So the parser takes it in: a read ``cnt[e]`` becomes the constant's body with
its left-hand indices replaced by ``e`` (a 0-d constant's symbol by its body), and the
constant's own summed indices renamed apart from every symbol of the reader, so that a
``Sum(.., k)`` of the constant never captures the reader's k.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy as sp

from derive.functions import where
from derive.language.affine import is_index
from derive.language.graph import Definition, LangError, Tensor
from derive.symbolic.indices import bound_indices, rename_bound


def taken_in(
    body: sp.Expr, constants: Mapping[str, Definition], tensors: Mapping[str, Tensor]
) -> sp.Expr:
    """``body`` with each read of a constant in ``constants`` replaced by its value at the
    indices read (``tensors``: the constants' shapes, to tell a 0-d constant's symbol)."""
    if not constants:
        return body
    taken: dict[sp.Basic, sp.Expr] = {}
    for read in body.atoms(sp.Indexed):
        c = constants.get(read.base.label.name)
        if c is not None:
            value = _at(c, read.indices, body)
            taken[read] = _in_axes(c, read, value, tensors[c.name].dims)
    for s in body.free_symbols:
        c = constants.get(getattr(s, "name", ""))
        if c is not None and not tensors[c.name].dims and not s.is_integer:
            taken[s] = _at(c, (), body)
    return body.xreplace(taken) if taken else body


def _in_axes(c: Definition, read: sp.Indexed, value: sp.Expr, dims: tuple) -> sp.Expr:
    """``value``, the constant read at ``read``'s subscripts, where each is inside its axis, and
    0 outside: a read past an axis is 0 (an affine subscript, a literal), as a tensor's is.
    Taken in as a formula, ``kern[t - s]`` with ``kern[k] = gamma**k`` was the formula's
    ``gamma**-1`` at s = t + 1 (an EMA as a causal convolution added the future; found by
    probing). A plain index is in range: its reads give it its range. A subscript that reads
    an int tensor is refused: a tensor's would be range-checked at run time, a formula has
    no entries to check."""
    for e, size in zip(read.indices, dims, strict=True):
        if is_index(e):
            continue
        if e.has(sp.Indexed):
            raise LangError(
                f"'{c.name}' reads no tensor (a constant taken into its readers), so it cannot "
                f"be read at a subscript of data ({e}): make it an input"
            )
        value = where(e >= 0, where(e <= size - 1, value, 0), 0)
    return value


def _at(c: Definition, at: tuple[sp.Expr, ...], reader: sp.Expr) -> sp.Expr:
    """The constant ``c`` at the indices ``at``, its bound indices renamed apart from the
    symbols of ``reader`` and of ``at`` (by the engine's one renamer, which cannot capture)."""
    taken = {s.name for s in reader.free_symbols | bound_indices(reader)}
    taken |= {s.name for e in at for s in e.free_symbols}

    def namer(limits: tuple, depth: int, scope: frozenset[str]) -> list[sp.Symbol]:
        out = []
        for s, *_ in limits:
            name, k = f"{s.name}_{c.name}", 1
            while name in taken or name in scope:
                name, k = f"{s.name}_{c.name}{k}", k + 1
            taken.add(name)
            out.append(sp.Symbol(name, **s.assumptions0))
        return out

    value = rename_bound(c.body, namer, taken)
    return value.xreplace(dict(zip(c.indices, at, strict=True)))
