"""Tools the IR's passes share: rebuild a tree by a rule, replace a node, place ``del``s.

Nodes are immutable values (:mod:`derive.ir.nodes`): a pass rewrites by building new ones,
with :func:`rebuilt` (a rule applied to every node, children first) or :func:`replaced` (one
node read as another). Statements say what they write and read, which is all :func:`safe`
needs to know that a value means the same tensor at each of its uses.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator

import sympy as sp

from derive.ir import nodes as ir

# new storage, which an update writes in place, or a view: never bound to a shared name
NOT_SHARED = (ir.View, ir.Zeros, ir.Full, ir.Clone, ir.IndexAdd, ir.Select)


def flat_statements(block: Iterable[ir.Statement]) -> Iterator[ir.Statement]:
    """The statements of ``block`` in order, those a guard (``if needs[0]: ...``) holds in
    its place (not the guard itself)."""
    for s in block:
        if isinstance(s, ir.Guarded):
            yield from flat_statements(s.body)
        else:
            yield s


def unused_axis(taken: set) -> sp.Symbol:
    """``slice0``, ``slice1``, ...: the first such index not in ``taken`` (a new axis's label,
    as a merged sliced axis gets)."""
    return next(s for k in range(len(taken) + 1) if (s := sp.Symbol(f"slice{k}")) not in taken)


def assigned_once(block: list[ir.Statement], keep: Collection[str]) -> dict[str, ir.Node]:
    """The tensors that a single-target assignment writes, written nowhere else in ``block``
    and not handed on (not in ``keep``), with their values: a pass may read such a name as
    its value, or drop it."""
    writes = Counter(n for s in block for n in s.writes)
    return {
        s.targets[0]: s.value
        for s in block
        if isinstance(s, ir.Assign)
        and len(s.targets) == 1
        and writes[s.targets[0]] == 1
        and s.targets[0] not in keep
        and not s.value.scalar
    }


def unfreed(block: list[ir.Statement], name: str) -> list[ir.Statement]:
    """``block`` with ``name`` taken out of its ``del`` statements (an empty one dropped)."""
    out = []
    for s in block:
        if isinstance(s, ir.Free) and name in s.names:
            s = ir.Free(tuple(n for n in s.names if n != name))
        if not (isinstance(s, ir.Free) and not s.names):
            out.append(s)
    return out


def freed(block: list[ir.Statement], temps: list[str]) -> list[ir.Statement]:
    """``block`` with ``del`` after the last statement that reads each of ``temps``."""
    last: dict[int, list[str]] = {}
    for name in temps:
        k = max(k for k, s in enumerate(block) if name in s.reads)
        last.setdefault(k, []).append(name)
    out = []
    for k, s in enumerate(block):
        out.append(s)
        if k in last:
            out.append(ir.Free(tuple(last[k])))
    return out


def safe(block: list[ir.Statement], node: ir.Node, at: list[int]) -> bool:
    """Nothing ``node`` reads is written from its first use up to its last."""
    reads = ir.refs(node)
    return not any(block[k].writes & reads for k in range(at[0], at[-1]))


def operands(node: ir.Node) -> Iterator[ir.Node]:
    """The nodes in ``node``'s fields (a Heaviside's dtype tensor included)."""
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, ir.Node):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, ir.Node))


def stem(node: ir.Node) -> str:
    """A temporary's name: the tensors it computes from, ``shared_gain_rstd`` (not ``t_``,
    which names a tangent in ``_jvp``)."""
    return "_".join(["shared", *sorted({n.removeprefix("shared_") for n in data(node)})])


def data(node: ir.Node) -> Iterator[str]:
    """The tensors ``node`` reads entries of (not those it takes a dtype or device from)."""
    if isinstance(node, ir.Ref):
        yield from () if node.scalar else (node.name,)
        return
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if f.name != "like":
            for v in value if isinstance(value, tuple) else (value,):
                yield from data(v) if isinstance(v, ir.Node) else ()


def mapped_operands(node, fn: Callable[[ir.Node], ir.Node | None]) -> dict:
    """Each field of ``node`` (a node or a statement) that holds a node, or a tuple holding
    nodes, mapped by ``fn``: the changes for :func:`dataclasses.replace`."""
    changes: dict = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, ir.Node):
            changes[f.name] = fn(value)
        elif isinstance(value, tuple) and any(isinstance(v, ir.Node) for v in value):
            changes[f.name] = tuple(fn(v) if isinstance(v, ir.Node) else v for v in value)
    return changes


def replaced(x, old: ir.Node, new: ir.Node):
    """``x`` (a statement or a node) with every ``old`` read as ``new``."""
    if x == old:
        return new
    changes = {}
    for f in dataclasses.fields(x):
        value = getattr(x, f.name)
        if isinstance(value, ir.Node):
            changes[f.name] = replaced(value, old, new)
        elif isinstance(value, tuple) and any(isinstance(v, ir.Node) for v in value):
            changes[f.name] = tuple(
                replaced(v, old, new) if isinstance(v, ir.Node) else v for v in value
            )
    return dataclasses.replace(x, **changes) if changes else x


def rebuilt(x, rule: Callable[[ir.Node], ir.Node], enter: Callable[[ir.Node], bool] | None = None):
    """``x`` (a statement or a node) with ``rule`` applied to every node, children first;
    a node ``enter`` rejects is left whole, unwalked (where the caller knows the rule changes
    nothing in it)."""
    if enter is not None and isinstance(x, ir.Node) and not enter(x):
        return x
    changes = {}
    for f in dataclasses.fields(x):
        value = getattr(x, f.name)
        if isinstance(value, ir.Node):
            changes[f.name] = rebuilt(value, rule, enter)
        elif isinstance(value, tuple) and any(isinstance(v, ir.Node) for v in value):
            changes[f.name] = tuple(
                rebuilt(v, rule, enter) if isinstance(v, ir.Node) else v for v in value
            )
    changed = any(changes[name] is not getattr(x, name) for name in changes)
    x = dataclasses.replace(x, **changes) if changed else x
    return rule(x) if isinstance(x, ir.Node) else x


def composed(node: ir.Permute) -> ir.Node:
    """A permute of a permute as one permute, or as its argument where they cancel."""
    inner = node.arg
    assert isinstance(inner, ir.Permute)
    perm = tuple(inner.perm[k] for k in node.perm)
    if perm == tuple(range(len(perm))):
        return ir.relabel(inner.arg, node.axes)
    return ir.Permute(inner.arg, perm, axes=node.axes)
