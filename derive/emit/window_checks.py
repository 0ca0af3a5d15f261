"""The checks a window read needs at run time, for every op with affine subscripts (issue 25).

A read such as ``x[n, c, S*t + D*k - P]`` is defined for any sizes and params: outside x it
is 0. Its lowering is not: torch's convolutions take S and D as a stride and a dilation
(positive, derive/lower/windows.py counts a param coefficient as positive), a subscript must
be a whole number, and a window over an empty axis, or an empty window, is refused by torch's
kernels in their own words. So the generated forward refuses, in one line naming the op, the
size or param and why:

- a param in an affine subscript that is not a python int (``stride = 1.5``: no index), or a
  param that enters a derived size that adds or floors (``HO = (H - K) // stride + 1`` would
  be a float; a product such as ``C / n_head`` is checked whole where it is bound);
- a param that multiplies an index (a stride, a dilation) that is not positive;
- any other such param (a padding, an offset) that is negative: the lowering's proofs that a
  read stays inside its tensor (:mod:`derive.lower.bounds`) and torch's kernels (no negative
  ``padding=``) take every int param as nonnegative, so the forward holds the caller to it
  (write ``x[t + P]`` or ``x[t - P]`` for the direction you mean);
- an axis read at an affine subscript that is empty (``T = 0``: every read is padding), and
  the range of an index in one (``K = 0``: an empty kernel; an output range such as
  ``L = (T + 2 P - D (K - 1) - 1) // S + 1`` is a derived size, checked positive already);
- the range of any index summed beside a window read (a convolution's channels, ``C = 0``:
  torch.conv1d of 0 input channels returns 0 output channels, where the definition's empty
  sum leaves the bias over every one; found by probing, a wrong shape without a word).

A plain subscript (``x[n, t]``, a constant, an entry of an int64 tensor) is no window: an
empty axis read that way is legal (a batch of 0 rows, a cumulative sum over T = 0) and gives
an empty result.
"""

from __future__ import annotations

import sympy as sp

from derive.emit.sizes import floor_parts, size_code
from derive.emit.statements import Code
from derive.errors import DerivationError
from derive.language import Definition, Graph, ReduceMax


def param_checks(g: Graph) -> list[Code]:
    """``_check_int`` for each param a subscript or a derived size reads, then
    ``_check_positive`` for each param that multiplies an index in a subscript or divides in a
    derived size (once each, before the derived sizes are computed)."""
    ints, positive = {}, {}
    for size, expr in g.derived.items():
        if not (isinstance(expr, sp.Add) or expr.has(sp.floor)):
            continue  # D = C / n_head: _check_derived holds it a positive int already
        for p in sorted(expr.free_symbols & set(g.params), key=str):
            ints.setdefault(p, f"it sets the size {size}")
        for f in sorted(expr.atoms(sp.floor), key=str):  # L = (T - K) // stride + 1
            den = floor_parts(f)[1]
            if den in g.params:
                positive.setdefault(den, f"it divides in {size} = {size_code(expr)}")
    for _, ind, _, sub in _affine_reads(g):
        shown = _shown(ind)
        for p in sorted(sub.free_symbols & set(g.params), key=str):
            ints.setdefault(p, f"it is in the subscript of {shown}")
        expanded = sp.expand(sub)
        for i in sorted(_indices(g, sub), key=str):
            for p in sorted(expanded.coeff(i).free_symbols & set(g.params), key=str):
                positive.setdefault(p, f"it multiplies {i} in {shown}")
    nonnegative = {  # derive.lower.bounds proves reads in range for int params >= 0
        p: why + "; window reads take it as >= 0" for p, why in ints.items() if p not in positive
    }
    _check_defaults(g, positive, nonnegative)
    _check_default_divisors(g)
    lines = [_check("_check_int", p, why) for p, why in ints.items()]
    lines += [_check("_check_positive", p, why) for p, why in positive.items()]
    lines += [_check("_check_nonnegative", p, why) for p, why in nonnegative.items()]
    return lines


def _check_defaults(g: Graph, positive: dict, nonnegative: dict) -> None:
    """Refuse an op whose param defaults the forward's own checks refuse: a module whose call
    with the defaults always raises (``x[n, t + p]`` with ``p = -1``) is no op to write."""
    for rules, bound, word in ((positive, 0, "positive"), (nonnegative, -1, ">= 0")):
        for p, why in rules.items():
            value = g.op.param_values().get(p.name)
            if isinstance(value, (int, float)) and not value > bound:
                raise DerivationError(
                    g.op.name,
                    f"param '{p.name}' defaults to {value!r}, but it must be {word}: {why}",
                )


def _check_default_divisors(g: Graph) -> None:
    """Refuse an op whose derived size divides by params alone that are 0 or less at their
    defaults (``T // (p - 1)`` at p = 1, ``C / h`` at h = 0): its forward refuses every call
    with the defaults, and `derive check` could draw no sizes for it."""
    ints = {p: v for p, v in g.params.items() if isinstance(v, int)}
    for size, expr in g.derived.items():
        dens = [floor_parts(f)[1] for f in expr.atoms(sp.floor)] + [sp.fraction(expr)[1]]
        for den in dens:
            if den.free_symbols and den.free_symbols <= set(ints) and not den.subs(ints) > 0:
                raise DerivationError(
                    g.op.name,
                    f"size {size} = {g.op.sizes.get(size.name, expr)} divides by {den}, which "
                    f"is {den.subs(ints)} at the params' defaults: it must be positive",
                )


def _check(helper: str, p: sp.Symbol, why: str) -> Code:
    return Code(f"{helper}({p.name!r}, {p.name}, {why!r})", reads={helper, p.name})


def window_sizes(g: Graph) -> dict[sp.Expr, str]:
    """Sizes that must be positive for a window read: the axis it reads, and the range of
    each index in its subscript (size -> why)."""
    found: dict[sp.Expr, str] = {}
    for step, ind, pos, sub in _affine_reads(g):
        shown, extents = _shown(ind), _extents(g, step)
        found.setdefault(ind.base.shape[pos], f"{shown} reads a window along it")
        for i in sorted(_indices(g, sub), key=str):
            extent = extents.get(i)
            if extent is not None and extent.free_symbols and extent not in g.derived:
                found.setdefault(extent, f"{i} runs over it in {shown}")
        # in sorted order: which sum names an extent first is in the message (a set's order
        # followed the hash seed: tests/cases/broadcast_aligned_twice.py read j or j2)
        for total in sorted(step.body.atoms(sp.Sum), key=sp.default_sort_key):
            # a convolution's channels: torch.conv1d over 0 of them returned 0 output channels
            if not total.function.has(ind):
                continue
            for var, lo, hi in total.limits:
                extent = sp.expand(hi - lo + 1)
                if extent.free_symbols and extent not in g.derived:
                    found.setdefault(extent, f"{var} is summed beside the window read {shown}")
    return found


def _affine_reads(g: Graph) -> list[tuple[Definition, sp.Indexed, int, sp.Expr]]:
    """(step, read, axis, subscript) for every subscript that is no plain index, constant or
    data."""
    reads = []
    for step in g.steps:
        if not isinstance(step, Definition):
            continue
        for ind in sorted(step.body.atoms(sp.Indexed), key=sp.default_sort_key):
            for pos, sub in enumerate(ind.indices):
                plain = isinstance(sub, sp.Symbol) or sub.is_Integer or sub.has(sp.Indexed)
                if not plain and _indices(g, sub):
                    reads.append((step, ind, pos, sub))
    return reads


def _indices(g: Graph, e: sp.Expr) -> set[sp.Symbol]:
    """The index symbols of ``e``: integer symbols that are no size (params are real)."""
    sizes = set(g.sizes) | set(g.derived)
    return {s for s in e.free_symbols if s.is_integer and s not in sizes and s not in g.params}


def _extents(g: Graph, step: Definition) -> dict[sp.Symbol, sp.Expr]:
    """Each index's number of values in ``step``: a Sum's or Max's limits, or the output
    axis it names."""
    extents = dict(zip(step.indices, g.tensors[step.name].dims, strict=True))
    for node in sorted(step.body.atoms(sp.Sum, ReduceMax), key=sp.default_sort_key):
        for var, lo, hi in node.limits:
            extents.setdefault(var, sp.expand(hi - lo + 1))
    return extents


def _shown(ind: sp.Indexed) -> str:
    return f"{ind.base.label}[{', '.join(map(str, ind.indices))}]"
