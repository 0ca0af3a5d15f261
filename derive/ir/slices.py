"""Element-wise siblings over slices: one kernel over the whole tensors, each read as its slice.

After :func:`~derive.ir.passes.merged_siblings`, attention's projections are slices of one
matmul, ``s = x @ Wh`` over (slice, b, h, t, d), and each adds its own slice of the bias:

    q = bh[0] + s[0],   k = bh[1] + s[1],   v = bh[2] + s[2].

Entry by entry that is ``(bh + s)[k]``: the same sum, for every k, of the same two numbers.
:func:`merged_maps` computes ``w = bh + s`` once (one kernel instead of three, and one sum
whose bias :func:`~derive.ir.passes._as_addmm` then takes into the matmul) and reads
``q = w[0]``, ``k = w[1]``, ``v = w[2]``. Bit for bit the same numbers: each entry is the
same operation on the same operands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import NamedTuple

import sympy as sp

from derive.ir import nodes as ir
from derive.ir.passes import aligned
from derive.ir.rewrite import freed, rebuilt, stem, unused_axis

_VARYING = -(2**62)  # the constant of a varying slice, in a family's template: no subscript


class _Member(NamedTuple):
    """A statement ``at`` of a family: its target, and the constant its slices read."""

    at: int
    name: str
    k: int


def merged_maps(
    block: list[ir.Statement], fresh: Callable[[str], str], keep: Collection[str]
) -> list[ir.Statement]:
    """``block`` with each family of element-wise statements that differ only in the one
    constant every slice they read takes (k = 0 .. n - 1, each once, n the sliced axis's
    length) computed once over the whole tensors into a name ``fresh`` gives, before the
    first of them, and each member bound to its slice of it.

    Only where nothing the merged value reads is written between the first member and the
    last, no member's tensor is written in place later (a slice is a view), and every node
    between a varying slice and the statement's root is element-wise or a broadcast. A name
    bound to a slice that the members read, read by nothing else afterwards, is dropped
    unless ``keep`` (the names the function hands on) holds it."""
    block = list(block)
    while (found := _first_family(block)) is not None:
        template, members = found
        whole = _whole(template)
        name = fresh(stem(whole))
        ref = ir.Ref(name, axes=whole.axes)
        n = len(members)
        out = []
        for k, s in enumerate(block):
            member = next((m for m in members if m.at == k), None)
            if member is not None and member is members[0]:
                out.append(ir.Assign((name,), whole))
            if member is not None:
                axes = block[k].value.axes
                s = ir.Assign(
                    (member.name,), ir.Slice(ref, (member.k,), (sp.Integer(n),), axes=axes)
                )
            out.append(s)
        block = freed(_dead_views_dropped(out, keep), [name])
    return block


def _first_family(block: list[ir.Statement]) -> tuple[ir.Node, list[_Member]] | None:
    """The first family (its template, its members in block order) that may be merged."""
    views = {
        s.targets[0]: s.value
        for s in block
        if isinstance(s, ir.Assign) and len(s.targets) == 1 and isinstance(s.value, ir.Slice)
    }
    written = [n for s in block if not isinstance(s, ir.Assign) for n in s.writes]
    families: dict[ir.Node, list[_Member]] = {}
    for at, s in enumerate(block):
        if not (isinstance(s, ir.Assign) and len(s.targets) == 1):
            continue
        if not isinstance(s.value, ir.Map) or s.value.scalar or s.targets[0] in written:
            continue
        found = _template(s.value, views)
        if found is not None:
            families.setdefault(found[0], []).append(_Member(at, s.targets[0], found[1]))
    for template, members in families.items():
        n = _length(template)
        if sorted(m.k for m in members) != list(range(n)) or n < 2:
            continue
        first, last = members[0].at, members[-1].at
        reads = ir.refs(template)  # what the merged value reads
        if any(block[k].writes & reads for k in range(first, last)):
            continue
        # a slice a member reads through a name: its tensor unwritten from there to the first
        named = set().union(*(ir.refs(block[m.at].value) for m in members)) & set(views)
        bound = [k for k, s in enumerate(block) if s.writes & named]
        if not any(
            block[j].writes & ir.refs(block[k].value) for k in bound for j in range(k + 1, first)
        ):
            return template, members
    return None


def _resolved(node: ir.Node, views: dict[str, ir.Node]) -> ir.Node:
    """``node`` with each read of a name bound to a slice read as that slice."""

    def rule(v: ir.Node) -> ir.Node:
        if isinstance(v, ir.Ref) and v.name in views and views[v.name].axes == v.axes:
            return views[v.name]
        return v

    return rebuilt(node, rule)


def _template(value: ir.Map, views: dict[str, ir.Node]) -> tuple[ir.Node, int] | None:
    """``value`` (names bound to slices read as those slices) with the constant of each
    slice that reads one constant of a known axis length marked varying, and that constant;
    None where there is no such slice, they read different constants, or one sits under a
    node that is not element-wise."""
    resolved = _resolved(value, views)
    constants: set[int] = set()

    def rule(v: ir.Node) -> ir.Node:
        if (found := _single_constant(v)) is not None:
            p, k = found
            constants.add(k)
            at = v.at[:p] + (_VARYING,) + v.at[p + 1 :]
            return ir.Slice(v.arg, at, v.sizes, axes=v.axes)
        return v

    template = rebuilt(resolved, rule)
    if len(constants) != 1 or not _only_maps_above(template):
        return None
    return template, constants.pop()


def _single_constant(v: ir.Node) -> tuple[int, int] | None:
    """(position, constant) of a slice reading one constant of an axis of known length."""
    if not isinstance(v, ir.Slice) or len(v.sizes) != len(v.at):
        return None
    constants = [p for p, k in enumerate(v.at) if k is not None]
    if len(constants) != 1 or not v.sizes[constants[0]].is_Integer:
        return None
    return constants[0], v.at[constants[0]]


def _varying(v: ir.Node) -> bool:
    return isinstance(v, ir.Slice) and _VARYING in v.at


def _only_maps_above(node: ir.Node) -> bool:
    """Every node with a varying slice below it is element-wise, a broadcast or the slice."""
    if _varying(node):
        return True
    below = [c for c in node.children() if any(_varying(x) for x in ir.walk(c))]
    if not below:
        return True
    if not isinstance(node, (ir.Map, ir.Broadcast)) or isinstance(node, ir.Select):
        return False
    return all(_only_maps_above(c) for c in below)


def _length(template: ir.Node) -> int:
    """The length of the axis the varying slices read (-1 where they disagree)."""
    lengths = {int(v.sizes[v.at.index(_VARYING)]) for v in ir.walk(template) if _varying(v)}
    return lengths.pop() if len(lengths) == 1 else -1


def _new_axis(template: ir.Node) -> sp.Symbol:
    """The label of the whole sliced axis: the one a labelled tensor the slices read gives it
    (``s[0]`` of ``s`` over (slice0, b, h, t, d): slice0, so the merged value reads ``s``
    under its own labels and a pass may read the contraction bound to ``s`` in its place),
    else an index no axis of the template uses."""
    args = [v.arg for v in ir.walk(template) if _varying(v)]
    labels = {
        v.arg.axes[v.at.index(_VARYING)]
        for v in ir.walk(template)
        if _varying(v) and len(v.arg.axes) == len(v.axes) + _constants(v)
    }
    inside = {a for x in args for v in ir.walk(x) for a in v.axes}
    taken = {a for v in ir.walk(template) for a in v.axes} - inside
    taken |= {a for v in ir.walk(template) if _varying(v) for a in v.axes}
    if len(labels) == 1 and not labels & taken:
        return labels.pop()
    return unused_axis(taken | inside)


def _constants(v: ir.Slice) -> int:
    return sum(1 for k in v.at if k is not None)


def _whole(template: ir.Node) -> ir.Node:
    """The family's value over the whole sliced axis, kept as its first axis."""
    new = _new_axis(template)

    def rule(v: ir.Node) -> ir.Node:
        if _varying(v):
            p = v.at.index(_VARYING)
            kept = sum(1 for x in v.at[:p] if x is None)
            axes = v.axes[:kept] + (new,) + v.axes[kept:]
            at = v.at[:p] + (None,) + v.at[p + 1 :]
            while at and at[-1] is None:
                at = at[:-1]
            whole = (
                ir.Slice(v.arg, at, v.sizes[: len(at)], axes=axes)
                if at
                else ir.relabel(v.arg, axes)
            )
            return aligned(whole, (new,) + tuple(a for a in axes if a != new))
        if isinstance(v, ir.Broadcast) and new in v.arg.axes:
            return aligned(v.arg, (new,) + v.axes)
        if isinstance(v, ir.Map) and any(new in c.axes for c in v.children()):
            axes = (new,) + v.axes
            return _realigned(v, axes, new)
        return v

    return rebuilt(template, rule)


def _realigned(v: ir.Map, axes: tuple[sp.Symbol, ...], new: sp.Symbol) -> ir.Node:
    """The element-wise ``v`` over ``axes`` (its own, the new axis first), each operand over
    the new axis aligned to them (the others broadcast over it, leading)."""

    def fixed(c):
        if isinstance(c, ir.Node) and new in c.axes and c.axes != axes:
            return aligned(c, axes)
        return c

    changes = {}
    for name in (f.name for f in dataclasses.fields(v)):
        value = getattr(v, name)
        if isinstance(value, ir.Node):
            changes[name] = fixed(value)
        elif isinstance(value, tuple) and any(isinstance(c, ir.Node) for c in value):
            changes[name] = tuple(fixed(c) for c in value)
    return dataclasses.replace(v, axes=axes, **changes)


def _dead_views_dropped(block: list[ir.Statement], keep: Collection[str]) -> list[ir.Statement]:
    """``block`` without the names bound to a slice that nothing reads any more."""
    out = list(block)
    while True:
        read = {n for s in out if not isinstance(s, ir.Free) for n in s.reads}
        dead = {
            s.targets[0]
            for s in out
            if isinstance(s, ir.Assign)
            and len(s.targets) == 1
            and isinstance(s.value, ir.Slice)
            and s.targets[0] not in read
            and s.targets[0] not in keep
        }
        if not dead:
            return out
        out = [
            ir.Free(tuple(n for n in s.names if n not in dead)) if isinstance(s, ir.Free) else s
            for s in out
            if not (isinstance(s, ir.Assign) and s.targets[0] in dead)
        ]
        out = [s for s in out if not (isinstance(s, ir.Free) and not s.names)]
