"""Affine subscripts and declared ranges (issue 25: convolutions, pooling, windows).

An affine subscript is an index plus or minus integers, sizes, int params or other indices,
each index times an integer or an int param::

    x[n, c, 2*t + k]            a strided window (stride 2)
    x[n, c, t + dilation*k - P]  a dilated, padded convolution's read
    x[n, t - 1]                 a shift

A read outside the tensor's axis is 0 (zero padding, as a convolution's): ``x[n, t - 1]`` at
t = 0 is 0. An index that subscripts a tensor only through an affine subscript (or only in a
where() condition) has no range to read off: the op declares it, once, as a size
(``ranges={"t": "L"}`` beside ``sizes={"L": "T - K + 1"}``).
"""

from __future__ import annotations

import sympy as sp

from derive.language.graph import LangError, ReduceMax
from derive.names import did_you_mean, identifier_problem


def is_index(s: sp.Basic) -> bool:
    """An index symbol: integer, not a size (sizes are positive), not a param (real)."""
    return isinstance(s, sp.Symbol) and bool(s.is_integer) and not s.is_positive


def is_affine(pos: sp.Expr) -> bool:
    """Whether ``pos`` is a subscript of the affine kind: an expression, neither an index,
    a constant nor an int tensor's entry, over at least one index."""
    if isinstance(pos, (sp.Symbol, sp.Indexed)) or pos.is_Number:
        return False
    return any(is_index(s) for s in pos.free_symbols)


def affine_problem(pos: sp.Expr) -> str | None:
    """Why ``pos`` is no affine subscript (one line), or None.

    pos = sum_i c_i i + c_0 with each c_i an integer or a product of integers and params, and
    c_0 integers, sizes and params; no float, no function, no tensor entry.
    """
    if pos.has(sp.Indexed) or pos.atoms(sp.Function):
        return "an affine subscript adds indices, sizes and int params: no tensor or function"
    indices = sorted((s for s in pos.free_symbols if is_index(s)), key=str)
    poly = sp.Poly(sp.expand(pos), *indices)
    if poly.total_degree() > 1 or any(not n.is_Integer for n in sp.expand(pos).atoms(sp.Number)):
        return "an affine subscript is a sum of indices times integers or int params"
    for i in indices:
        coef = poly.coeff_monomial(i)
        if any(s.is_integer or not s.is_real for s in coef.free_symbols):  # params are real
            return f"index {i}'s coefficient {coef} must be an integer or an int param"
    return None


def declared_range(index: sp.Symbol, inferred: set, declared: dict) -> sp.Expr | None:
    """The declared range of ``index``, checked against the sizes it subscripts plainly."""
    if index not in declared:
        return None
    size = declared[index]
    if inferred and inferred != {size}:
        shown = ", ".join(sorted(map(str, inferred)))
        raise LangError(
            f"index '{index}' is declared with range {size} (ranges=...), but it subscripts an "
            f"axis of size {shown}"
        )
    return size


def parse_ranges(ranges: dict[str, str], sizes: dict[str, sp.Symbol]) -> dict:
    """``ranges={"t": "L"}``: index symbol -> the size it runs over (an input's or a derived
    size, by name)."""
    out = {}
    for name, text in sorted(ranges.items()):
        if not name.isidentifier() or not name[:1].islower():
            raise LangError(f"ranges: '{name}' must be an index (a lower-case name)")
        problem = identifier_problem(name)  # a keyword: no definition could spell the index
        if problem is not None:
            raise LangError(f"ranges: index '{name}' {problem}")
        size = sizes.get(text.strip())
        if size is None:
            raise LangError(
                f"ranges: the range of '{name}' must name a size, not '{text}'; declare it in "
                f"sizes, e.g. sizes={{'L': 'T - K + 1'}}, ranges={{'{name}': 'L'}}"
            )
        out[sp.Symbol(name, integer=True)] = size
    return out


def check_ranges_used(ranges: dict, steps: list) -> None:
    """Every index ``ranges`` declares is one a definition uses: a misspelt key
    (``ranges={"q": "T"}`` beside ``out[n, t]``) was ignored, the real index's range then
    inferred or refused as undeclared. Refused, naming the closest index the definitions use
    (or all of them, where none is close: one-letter names are never)."""
    used = set()
    for step in steps:
        body = getattr(step, "body", None)
        if body is None:  # a view: no indices
            continue
        used |= set(step.indices) | {s for s in body.free_symbols if is_index(s)}
        used |= {v for r in body.atoms(sp.Sum, ReduceMax) for v, *_ in r.limits}
    for index in sorted(set(ranges) - used, key=str):
        names = sorted(s.name for s in used)
        hint = did_you_mean(index.name, names) or f" (the definitions' indices: {', '.join(names)})"
        raise LangError(f"ranges: '{index}' is an index of no definition{hint}")


def check_affine_params(body: sp.Expr, params: dict) -> None:
    """A param in an affine subscript is a whole number of steps: its default must be an int."""
    for ind in body.atoms(sp.Indexed):
        for pos in ind.indices:
            if not is_affine(pos):
                continue
            for p in sorted(pos.free_symbols & set(params), key=str):
                if not isinstance(params[p], int) or isinstance(params[p], bool):
                    raise LangError(
                        f"param '{p}' is part of the subscript {pos} of {ind}, so its default "
                        "must be an int"
                    )
