"""Only the terms of the cotangents given: statements guarded by the double backward's
``present``.

Autograd passes None for a cotangent nothing downstream reads (a gradient penalty on x alone:
W's first-order gradient is no part of it). :mod:`derive.symbolic.seeds` reads a term only
those reach where one of its cotangents is given, ``(T if present[k] else acc)``, so T is
never added in; but the common-subexpression pass names T's parts in statements of their own
(linear's ``sum_db_dW_grad_y = grad_y @ db_dW.T``), which ran whether or not T was read, a GEMM
on zeros. Each statement is guarded by the flags under which what it writes is read:

    when(read of n in s) = when(s) and present[P]   inside the first branch of a
                                                    ``(a if present[P] else b)``
                         = when(s)                  anywhere else
    when(n)  = the union of when() over the reads of n   (always, if a result or unread)
    when(s)  = the union of when(n) over the names s writes

taken consumers first, by name (a name written twice is guarded by what either write's
readers need). A conjunction of two disjunctions is kept as the smaller one, a condition that
holds whenever the conjunction does: a statement may run where it is not read, never skip
where it is. A ``del`` runs under the flags its names were assigned under. The guards join
those of :mod:`derive.ir.needs` in one ``if``: ``if needs[0] and present[1]: ...``.
"""

from __future__ import annotations

from collections.abc import Iterator

from derive.ir import nodes as ir

When = frozenset[int] | None  # the present flags one of which must hold; None: always


def given_guarded(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` (maybe guarded on ``needs`` already) with each statement whose writes are
    read only under some ``present`` flags guarded on them (see the module docstring)."""
    flat = [(s.on, b) if isinstance(s, ir.Guarded) else ((), s) for s in block for b in _body(s)]
    if not any(isinstance(n, ir.Given) for _, s in flat for n in _nodes(s)):
        return block
    when_name: dict[str, When] = {}
    when_stmt: dict[int, When] = {}
    for _, s in reversed(flat):
        if isinstance(s, ir.Free):
            continue
        own = _union(when_name[n] if n in when_name else None for n in s.writes)
        when_stmt[id(s)] = own
        for name, when in _reads(s, own):
            when_name[name] = _union((when_name[name], when)) if name in when_name else when
    assigned: dict[str, When] = {}
    for _, s in flat:
        if not isinstance(s, ir.Free):
            for n in s.writes:
                w = when_stmt[id(s)]
                assigned[n] = _union((assigned[n], w)) if n in assigned else w
    out: list[tuple[tuple[int, ...], tuple[int, ...], ir.Statement]] = []
    for on, s in flat:
        if isinstance(s, ir.Free):
            groups: dict[tuple[int, ...], list[str]] = {}
            for n in s.names:
                groups.setdefault(_flags(assigned.get(n)), []).append(n)
            out.extend((on, given, ir.Free(tuple(names))) for given, names in groups.items())
        else:
            out.append((on, _flags(when_stmt[id(s)]), s))
    return _grouped(out)


def _body(s: ir.Statement) -> tuple[ir.Statement, ...]:
    return s.body if isinstance(s, ir.Guarded) else (s,)


def _nodes(s: ir.Statement) -> Iterator[ir.Node]:
    for root in s.nodes():
        yield from ir.walk(root)


def _reads(s: ir.Statement, own: When) -> Iterator[tuple[str, When]]:
    """Each name ``s`` reads, with the flags under which it reads it."""
    seen: set[str] = set()

    def visit(node: ir.Node, when: When) -> Iterator[tuple[str, When]]:
        if isinstance(node, ir.Ref):
            seen.add(node.name)
            yield node.name, when
        elif isinstance(node, ir.Select) and isinstance(node.cond, ir.Given):
            yield from visit(node.a, _both(when, frozenset(node.cond.on)))
            yield from visit(node.b, when)
        else:
            for child in node.children():
                yield from visit(child, when)

    for root in s.nodes():
        yield from visit(root, own)
    for name in s.reads - seen:  # a target updated in place: no node names it
        yield name, own


def _union(whens) -> When:
    out: frozenset[int] = frozenset()
    for w in whens:
        if w is None:
            return None
        out |= w
    return out


def _both(a: When, b: frozenset[int]) -> frozenset[int]:
    """A disjunction that holds wherever both ``a`` and ``b`` hold: the smaller of the two."""
    return b if a is None or len(b) <= len(a) else a


def _flags(w: When) -> tuple[int, ...]:
    return () if w is None else tuple(sorted(w))


def _grouped(
    out: list[tuple[tuple[int, ...], tuple[int, ...], ir.Statement]],
) -> list[ir.Statement]:
    """Consecutive statements under the same guards as one guarded block."""
    block: list[ir.Statement] = []
    last: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    for on, given, s in out:
        if not on and not given:
            block.append(s)
            last = None
        elif last == (on, given):
            prev = block[-1]
            block[-1] = ir.Guarded(on, prev.body + (s,), given)
        else:
            block.append(ir.Guarded(on, (s,), given))
            last = (on, given)
    return block
