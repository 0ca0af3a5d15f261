"""Passes over the kernel IR: statements in, statements out, nothing else changed.

- :func:`common_subexpressions`: a tensor a block computes twice is computed once, into a name
  (``t = torch.square(x)``), read where it was computed before, and freed after its last use.
  Same kernels, same operands, so the same numbers: one pass over the tensor, not two.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from derive.ir import nodes as ir

# new storage, which an update writes in place, or a view: never bound to a shared name
NOT_SHARED = (ir.View, ir.Zeros, ir.Full, ir.Clone, ir.IndexAdd, ir.Select)


def common_subexpressions(
    block: list[ir.Statement], fresh: Callable[[str], str]
) -> list[ir.Statement]:
    """``block`` with each tensor computed more than once bound to a name (``fresh`` gives
    it) just before its first use, and freed after its last (``del t``: the block's peak
    memory holds it no longer than it must); the largest such computation first, so a
    repeated ``a * b + c`` is one temporary, not ``a * b`` and then ``t + c``.

    A computation is shared only where it means the same tensor at each use: no statement
    between its first and its last use writes what it reads (an in-place update, a name
    assigned twice)."""
    block, temps = list(block), []
    while (found := _repeated(block)) is not None:
        node, first = found
        name = ir.Ref(fresh(_stem(node)), axes=node.axes)
        rest = [_replaced(s, node, name) for s in block[first:]]
        block = block[:first] + [ir.Assign((name.name,), node)] + rest
        temps.append(name.name)
    return _freed(block, temps)


def _freed(block: list[ir.Statement], temps: list[str]) -> list[ir.Statement]:
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


def _repeated(block: list[ir.Statement]) -> tuple[ir.Node, int] | None:
    """The largest computation used at least twice where sharing it is safe, and the index of
    the statement that first uses it; None when there is none."""
    uses: dict[ir.Node, list[int]] = {}
    for k, s in enumerate(block):
        for node in _candidates(s):
            uses.setdefault(node, []).append(k)
    found = [(node, at) for node, at in uses.items() if len(at) > 1 and _safe(block, node, at)]
    if not found:
        return None
    node, at = max(found, key=lambda f: (_size(f[0]), -f[1][0]))
    return node, at[0]


def _safe(block: list[ir.Statement], node: ir.Node, at: list[int]) -> bool:
    """Nothing ``node`` reads is written from its first use up to its last."""
    reads = {n.name for n in ir.walk(node) if isinstance(n, ir.Ref)}
    return not any(block[k].writes & reads for k in range(at[0], at[-1]))


def _candidates(s: ir.Statement) -> Iterator[ir.Node]:
    """The tensor computations ``s`` makes below its own value: an assignment's whole value
    (or a view of it) is its target's storage, which an update may write, so never shared."""
    roots = list(s.nodes())
    if isinstance(s, ir.Assign):
        (value,) = roots
        while isinstance(value, ir.View):
            value = value.arg
        roots = list(_operands(value))
    for root in roots:
        yield from _below(root)


def _below(node: ir.Node) -> Iterator[ir.Node]:
    """``node`` and the computations under it worth a name: on tensor data (an index built
    from sizes alone, ``torch.arange(N)``, is cheaper to make again than to keep)."""
    if isinstance(node, ir.Ref) or node.scalar or not any(_data(node)):
        return
    if not isinstance(node, NOT_SHARED):
        yield node
    for child in _operands(node):
        yield from _below(child)


def _operands(node: ir.Node) -> Iterator[ir.Node]:
    """The nodes in ``node``'s fields (a Heaviside's dtype tensor included)."""
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, ir.Node):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, ir.Node))


def _size(node: ir.Node) -> int:
    return 1 + sum(_size(c) for c in _operands(node))


def _stem(node: ir.Node) -> str:
    """A temporary's name: the tensors it computes from, ``shared_gain_rstd`` (not ``t_``,
    which names a tangent in ``_jvp``)."""
    return "_".join(["shared", *sorted(set(_data(node)))])


def _data(node: ir.Node) -> Iterator[str]:
    """The tensors ``node`` reads entries of (not those it takes a dtype or device from)."""
    if isinstance(node, ir.Ref):
        yield from () if node.scalar else (node.name,)
        return
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if f.name != "like":
            for v in value if isinstance(value, tuple) else (value,):
                yield from _data(v) if isinstance(v, ir.Node) else ()


def _replaced(x, old: ir.Node, new: ir.Node):
    """``x`` (a statement or a node) with every ``old`` read as ``new``."""
    if x == old:
        return new
    changes = {}
    for f in dataclasses.fields(x):
        value = getattr(x, f.name)
        if isinstance(value, ir.Node):
            changes[f.name] = _replaced(value, old, new)
        elif isinstance(value, tuple) and any(isinstance(v, ir.Node) for v in value):
            changes[f.name] = tuple(
                _replaced(v, old, new) if isinstance(v, ir.Node) else v for v in value
            )
    return dataclasses.replace(x, **changes) if changes else x
