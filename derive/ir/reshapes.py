"""Reshapes of reshapes: ``x.reshape(A).reshape(B)`` is ``x.reshape(B)``.

A reshape reads its argument's entries in row-major order and lays them out again in that
order, so two in a row are one: every entry lands where the last alone puts it. The lowering
makes such chains where an op's definitions split an axis that a kernel wants whole: a grouped
convolution views ``x[N, C, H, W]`` as ``xg[N, groups, CG, H, W]`` (its definitions read the
groups apart), and ``torch.conv2d`` reads ``xg.reshape(N, groups * CG, H, W)`` back; its output
is reshaped to ``outg[N, groups, OG, HO, WO]`` and then to ``out[N, O, HO, WO]``.

Eagerly the detour costs two view calls. Under ``torch.compile(dynamic=True)`` it broke
Inductor: the 4-d view of the 5-d view of an input has strides it cannot order
(``3*s**2 < 3*s``, sizes it cannot compare), an InductorError where ``F.conv2d`` compiles. So
the chain is read as one reshape of the first tensor:

- a reshape of a name assigned once to a reshape (``Reshape``, ``Flatten``, ``Unflatten``) of
  a name reads the first name, where nothing writes either between (the view's statement
  stays where the function hands the name on or reads it elsewhere, else it goes);
- a reshape of a reshape in one expression is one reshape.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection

from derive.ir import nodes as ir
from derive.ir.rewrite import freed, rebuilt, safe, unfreed

RESHAPES = (ir.Reshape, ir.Flatten, ir.Unflatten)


def reshapes_read_through(
    block: list[ir.Statement], keep: Collection[str] | None
) -> list[ir.Statement]:
    """``block`` with each reshape of a reshape read as one reshape (see the module
    docstring); ``keep``: the names the function hands on (None: every name)."""
    writes = Counter(n for s in block for n in s.writes)
    frees = {n for s in block if isinstance(s, ir.Free) for n in s.names}
    at: dict[str, int] = {}
    values: dict[str, ir.Node] = {}
    for k, s in enumerate(block):
        if isinstance(s, ir.Assign) and len(s.targets) == 1 and writes[s.targets[0]] == 1:
            if isinstance(s.value, RESHAPES) and not s.value.scalar:
                at[s.targets[0]], values[s.targets[0]] = k, s.value

    def movable(name: str, k: int) -> bool:
        """The reshape ``name`` holds reads a name, written nowhere from ``name``'s statement
        up to statement k: k may read that name instead (a computation is never moved: the
        formulas page shows each intermediate's own statement)."""
        inner = values[name].arg
        return isinstance(inner, ir.Ref) and not inner.scalar and safe(block, inner, [at[name], k])

    out = list(block)
    for k, s in enumerate(block):

        def through(node: ir.Node, k: int = k) -> ir.Node:
            if not isinstance(node, ir.Reshape):
                return node
            arg = node.arg
            if isinstance(arg, ir.Ref) and arg.name in values and movable(arg.name, k):
                return dataclasses.replace(node, arg=values[arg.name].arg)
            if isinstance(arg, RESHAPES):
                return dataclasses.replace(node, arg=arg.arg)
            return node

        out[k] = rebuilt(s, through)
        if k in at.values():  # read through from here on as rewritten
            values[s.targets[0]] = out[k].value
    return _freed_after_reads(_unread(out, block, keep), frees)


def _unread(
    block: list[ir.Statement], before: list[ir.Statement], keep: Collection[str] | None
) -> list[ir.Statement]:
    """``block`` without the reshapes no statement reads any longer (nor hands on)."""
    if keep is None:
        return block
    read = {n for s in block for n in s.reads}
    was = {n for s in before for n in s.reads}
    gone = {
        s.targets[0]
        for s in block
        if isinstance(s, ir.Assign)
        and len(s.targets) == 1
        and isinstance(s.value, RESHAPES)
        and s.targets[0] in was
        and s.targets[0] not in read
        and s.targets[0] not in keep
    }
    for name in gone:
        block = unfreed(block, name)
    return [s for s in block if not (isinstance(s, ir.Assign) and set(s.targets) & gone)]


def _freed_after_reads(block: list[ir.Statement], frees: set[str]) -> list[ir.Statement]:
    """``block`` with each name of ``frees`` that a statement reads after its ``del`` freed
    after its last read instead (a reshape read through reads its source later)."""
    for name in sorted(frees):
        dels = [k for k, s in enumerate(block) if isinstance(s, ir.Free) and name in s.names]
        if dels and any(
            name in s.reads for s in block[dels[0] + 1 :] if not isinstance(s, ir.Free)
        ):
            block = freed(unfreed(block, name), [name])
    return block
