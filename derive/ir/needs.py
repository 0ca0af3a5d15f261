"""Only the gradients asked for: statements guarded by the caller's ``needs``.

Autograd calls a node's backward with ``ctx.needs_input_grad``: an input that is data (a
classifier's images, linear's x where x is a batch) needs no gradient, and torch's own
backwards skip it (linear's ``dx = grad_out @ W`` is a GEMM, conv2d's ``dx`` a transposed
convolution). A backward with several results gets ``needs``, one flag per input, and each
statement runs only where a result it feeds is needed:

    feeds(s) = {r : s writes r} | union of feeds(s') over the statements s' that read a name
               s writes,

taken by name over the whole block (a name written twice feeds what either write feeds), so
a statement is skipped only where no needed result can read what it writes. A statement
feeding every result runs unguarded; a ``del`` runs where the statements that assigned its
names ran. Reading a name implies it was assigned: an assignment's guard is the union of
its readers' guards and its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from derive.ir import nodes as ir


def guarded(block: list[ir.Statement], results: Mapping[str, int]) -> list[ir.Statement]:
    """``block`` with each statement that feeds only some of ``results`` (name -> position
    in ``needs``) wrapped in :class:`~derive.ir.nodes.Guarded` on those positions; consecutive
    statements under one guard share it."""
    every = frozenset(results.values())
    feeds = _feeds(block, results)
    assigned: dict[str, frozenset[int]] = {}
    for s in block:
        for n in s.writes:
            assigned[n] = assigned.get(n, frozenset()) | feeds[id(s)]
    out: list[ir.Statement] = []
    for s in block:
        if isinstance(s, ir.Free):
            out.extend(_split_free(s, assigned, every))
            continue
        on = feeds[id(s)]
        out.append(s if not on or on == every else ir.Guarded(tuple(sorted(on)), (s,)))
    return _grouped(out)


def _feeds(block: list[ir.Statement], results: Mapping[str, int]) -> dict[int, frozenset[int]]:
    """Each statement's result positions (by ``id``): the fixed point of the docstring's rule."""
    by_name: dict[str, frozenset[int]] = {n: frozenset({k}) for n, k in results.items()}
    while True:
        feeds: dict[int, frozenset[int]] = {}
        for s in block:
            if isinstance(s, ir.Free):
                continue
            feeds[id(s)] = frozenset().union(*(by_name.get(n, frozenset()) for n in s.writes))
        grown = dict(by_name)
        for s in block:
            if isinstance(s, ir.Free):
                continue
            for n in s.reads:  # an update in place reads what it writes: no change there
                grown[n] = grown.get(n, frozenset()) | feeds[id(s)]
        if grown == by_name:
            return feeds
        by_name = grown


def _split_free(
    s: ir.Free, assigned: dict[str, frozenset[int]], every: frozenset[int]
) -> list[ir.Statement]:
    """``del a, b`` as one ``del`` per guard its names were assigned under (a name the block
    did not assign, an input, is freed unguarded)."""
    groups: dict[frozenset[int], list[str]] = {}
    for n in s.names:
        on = assigned.get(n, every)
        groups.setdefault(every if not on else on, []).append(n)
    return [
        (
            ir.Free(tuple(names))
            if on == every
            else ir.Guarded(tuple(sorted(on)), (ir.Free(tuple(names)),))
        )
        for on, names in groups.items()
    ]


def _grouped(block: list[ir.Statement]) -> list[ir.Statement]:
    """Consecutive guarded statements under the same positions as one guard."""
    out: list[ir.Statement] = []
    for s in block:
        last = out[-1] if out else None
        if isinstance(s, ir.Guarded) and isinstance(last, ir.Guarded) and last.on == s.on:
            out[-1] = ir.Guarded(s.on, last.body + s.body)
        else:
            out.append(s)
    return out
