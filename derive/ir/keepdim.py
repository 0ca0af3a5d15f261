"""A reduction read back over the axes it reduced keeps them: ``x.sum(1, keepdim=True)``.

A row statistic is mostly read broadcast against the rows it came from: ``x - mean[:, None]``,
``rstd[:, None] * diff``, softmax's ``counts / sums[:, :, None]``. Printed as it is lowered,
each read is a view (``unsqueeze``), one aten call on every read of every step; computed with
``keepdim=True`` the tensor already has the size-1 axes the reads put back, and they read it as
it is. The entries are the same numbers (the same kernel, only the result's shape differs).

The rule, over any block: a name assigned once to a ``sum``, ``mean`` or ``amax`` over some
axes, or element-wise from such names only (``rstd = rsqrt(eps + var)``), that the function
does not hand on (returned, saved: the caller reads their shapes) and that every statement
reads only as ``broadcast(e)`` with the size-1 axes exactly where the reduction removed them
(``e`` element-wise over such names and python numbers: ``(s * (-1 / C))[:, None]``), or bare
inside another such name's element-wise value. Each of those reads becomes ``e`` itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

import sympy as sp

from derive.ir import nodes as ir
from derive.ir.printer import leading_sum
from derive.ir.rewrite import assigned_once, mapped_operands, rebuilt

REDUCTIONS = ("sum", "mean", "amax")
# element-wise nodes: the size-1 axes of their operands pass through to the result
ELEMENTWISE = (ir.Map, ir.Cast)

Pattern = tuple[bool, ...]  # per axis of the unreduced tensor: kept (True) or reduced


def kept_dims(block: list[ir.Statement], keep: Collection[str]) -> list[ir.Statement]:
    """``block`` with each reduction that is only read broadcast back over the axes it
    reduced computed with ``keepdim=True``, and those reads reading it as it is."""
    values = _assigned_once(block, keep)
    patterns = _reductions(values)
    while True:  # names element-wise over kept names are kept too
        more = {
            n: p for n, v in values.items() if n not in patterns and (p := _pattern(v, patterns))
        }
        if not more:
            break
        patterns.update(more)
    while bad := _misread(block, values, patterns):
        for name in bad:
            del patterns[name]
    if not patterns:
        return block
    full = _full_axes(block, values, patterns)
    out = [_rewritten(s, patterns, full) for s in block]
    # every read of a kept name now has its kept shape; where one would not (a read this
    # module failed to see), the block stays as it was: the unkept code is right as it is
    stale = any(
        isinstance(n, ir.Ref) and n.name in full and n.axes != full[n.name]
        for s in out
        for root in s.nodes()
        for n in ir.walk(root)
    )
    return block if stale else out


def _assigned_once(block: list[ir.Statement], keep: Collection[str]) -> dict[str, ir.Node]:
    """The tensors the block assigns exactly once, reads, and does not hand on, with their
    values."""
    read = {n for s in block if not isinstance(s, ir.Free) for n in s.reads}
    return {n: v for n, v in assigned_once(block, keep).items() if n in read}


def _reductions(values: dict[str, ir.Node]) -> dict[str, Pattern]:
    """The names assigned a reduction that keepdim can print (not the blocked column sums:
    the helper has no keepdim), each with its pattern of kept axes."""
    out = {}
    for name, v in values.items():
        if isinstance(v, ir.Reduce) and v.kind in REDUCTIONS and v.dims and leading_sum(v) is None:
            out[name] = tuple(k not in v.dims for k in range(len(v.arg.axes)))
    return out


def _pattern(node: ir.Node, patterns: dict[str, Pattern]) -> Pattern | None:
    """The pattern of ``node`` when it is element-wise over names of one pattern (at least
    one), python numbers and 0-d tensors, each over ``node``'s own axes (nothing broadcast
    inside it); else None."""
    found: set[Pattern] = set()

    def visit(n: ir.Node) -> bool:
        if n.scalar or not n.axes:
            return True
        if isinstance(n, ir.Ref):
            if n.name not in patterns or n.axes != node.axes:
                return False
            found.add(patterns[n.name])
            return True
        return isinstance(n, ELEMENTWISE) and n.axes == node.axes and all(map(visit, n.children()))

    if not visit(node) or len(found) != 1:
        return None
    return found.pop()


def _restores(n: ir.Broadcast, patterns: dict[str, Pattern]) -> bool:
    """Whether ``n`` puts back exactly the axes its kept names reduced: ``x[:, None]`` on a
    tensor of r axes has the size-1 axes where ``kept`` is False, then x's axes left over."""
    pattern = _pattern(n.arg, patterns)
    if pattern is None:
        return False
    r = pattern.count(True)
    return n.kept + (True,) * (r - n.kept.count(True)) == pattern


def _misread(
    block: list[ir.Statement], values: dict[str, ir.Node], patterns: dict[str, Pattern]
) -> set[str]:
    """The names in ``patterns`` some statement reads other than as a broadcast back over
    their reduced axes (or bare in a kept name's element-wise value), or whose element-wise
    value no longer reads kept names only."""
    bad: set[str] = set()

    def visit(n: ir.Node) -> None:
        if isinstance(n, ir.Broadcast) and _restores(n, patterns):
            return
        if isinstance(n, ir.Ref) and n.name in patterns:
            bad.add(n.name)
        for c in n.children():
            visit(c)

    for s in block:
        own = isinstance(s, ir.Assign) and len(s.targets) == 1 and s.targets[0] in patterns
        if own and not isinstance(values[s.targets[0]], ir.Reduce):
            if _pattern(s.value, patterns) != patterns[s.targets[0]]:
                bad.add(s.targets[0])
            continue  # its reads are bare, and kept with it
        for root in s.nodes():
            visit(root)
    return bad


def _full_axes(
    block: list[ir.Statement], values: dict[str, ir.Node], patterns: dict[str, Pattern]
) -> dict[str, tuple[sp.Symbol, ...]]:
    """The axes of the unreduced tensor each kept name ranges over (its size-1 axes labelled
    by the indices they reduced): a reduction's argument's, or those of a kept name its
    element-wise value reads (assigned before it)."""
    full: dict[str, tuple[sp.Symbol, ...]] = {}
    for s in block:
        name = s.targets[0] if isinstance(s, ir.Assign) else None
        if name not in patterns:
            continue
        v = values[name]
        if isinstance(v, ir.Reduce):
            full[name] = v.arg.axes
        else:
            read = next(n for n in ir.walk(v) if isinstance(n, ir.Ref) and n.name in patterns)
            full[name] = full[read.name]
    return full


def _rewritten(s: ir.Statement, patterns: dict[str, Pattern], full: dict) -> ir.Statement:
    """``s`` with the kept names' reductions keeping their axes and their broadcasts gone."""

    def rule(n: ir.Node) -> ir.Node:
        if isinstance(n, ir.Broadcast) and _restores(n, patterns):
            read = next(r for r in ir.walk(n.arg) if isinstance(r, ir.Ref) and r.name in full)
            return _widened(n.arg, full[read.name])
        return n

    if isinstance(s, ir.Assign) and len(s.targets) == 1 and s.targets[0] in patterns:
        name = s.targets[0]
        if isinstance(s.value, ir.Reduce):  # its argument may read kept names back too
            value = rebuilt(s.value, rule)
            value = dataclasses.replace(value, keepdim=True, axes=value.arg.axes)
        else:
            value = _widened(s.value, full[name])
        return dataclasses.replace(s, value=value)
    return rebuilt(s, rule)


def _widened(node: ir.Node, axes: tuple[sp.Symbol, ...]) -> ir.Node:
    """An element-wise expression over kept names, relabelled over the unreduced ``axes``
    (not :func:`~derive.ir.rewrite.rebuilt`: a python number or a 0-d tensor inside, a sum
    over every axis, keeps its own labels, which an einsum below it prints from)."""
    if node.scalar or not node.axes:
        return node
    if isinstance(node, ir.Ref):
        return dataclasses.replace(node, axes=axes)
    changes = mapped_operands(node, lambda v: _widened(v, axes))
    return dataclasses.replace(node, **changes, axes=axes)
