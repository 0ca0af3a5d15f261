"""Dead statements dropped: what no later statement reads and the function does not hand on.

The lowering names some values before it knows who reads them: a sum that repeats across a
block's expressions is computed once into a name (:mod:`derive.lower.memo`), and a later
rewrite may leave no reader of it (``C[n]`` pulled out of ``Sum(C[idx[f]] e[f] [idx[f] = n])``
reads the sum without C). Such a statement is work nobody uses, and worse, :mod:`derive.ir.needs`
guards a statement by the results it feeds: one feeding none would run where the names it
reads were skipped.

Liveness, walked backwards from the names handed on (``keep``):

    live  = keep
    for s in reversed(block):  s is kept  iff  s writes nothing, or writes a name in live;
                               a kept s adds its reads to live

An update in place reads its own target, so the statement that made the target stays with
it; a ``del`` keeps only the names some kept statement still writes (or that no statement
writes: inputs).
"""

from __future__ import annotations

from collections.abc import Collection

from derive.ir import nodes as ir


def dead_dropped(block: list[ir.Statement], keep: Collection[str]) -> list[ir.Statement]:
    """``block`` without the statements whose writes neither ``keep`` nor a kept later
    statement reads, and without their names in ``del``."""
    live = set(keep)
    kept: list[ir.Statement] = []
    for s in reversed(block):
        if isinstance(s, ir.Free):
            kept.append(s)
            continue
        if s.writes and not s.writes & live:
            continue
        live |= s.reads
        kept.append(s)
    kept.reverse()
    written = {n for s in block for n in s.writes}
    still = {n for s in kept for n in s.writes}
    out: list[ir.Statement] = []
    for s in kept:
        if isinstance(s, ir.Free):
            names = tuple(n for n in s.names if n in still or n not in written)
            if names:
                out.append(s if names == s.names else ir.Free(names))
        else:
            out.append(s)
    return out
