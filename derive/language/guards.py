"""Guards: the where() conditions that let an int input hold entries outside its axis.

Cross-entropy's ignore_index, as users write it: ``where(t[n] >= 0, x[n, t[n]], 0)`` or
``where(t[n] != -1, x[n, t[n]], 0)`` reads x only where t[n] is an index; elsewhere t[n] marks
a position to ignore. An int input whose every read as a subscript sits in such a branch is
read clamped to 0 and up (any index in range: the where discards it) by the lowering
(``derive.lower.select.safe_indices``), and its range check admits exactly the entries every
read ignores (``derive.emit.checks``): any negative one under ``t >= 0``, the value itself
under ``t != -1``. A call inside such a branch stays there (``derive.symbolic.saving``): lifted
out of its where(), it would read the ignored entries.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import sympy as sp

from derive.functions import where


@dataclass(frozen=True)
class Ignored:
    """The entries of an int input outside its axis that the where() guarding its every read
    ignores: any negative one (``where(t[n] >= 0, ..t[n]..)``), or exactly ``values``, each
    negative (``where(t[n] != -1, ..t[n]..)``: a -2 there would be read). Such an input is
    read clamped to 0 and up; its range check admits these entries and no other."""

    negative: bool = False
    values: frozenset[int] = frozenset()

    def admits(self, v: int) -> bool:
        return v < 0 and (self.negative or v in self.values)

    def __or__(self, other: Ignored) -> Ignored:  # a read under both guards
        if self.negative or other.negative:
            return Ignored(negative=True)
        return Ignored(values=self.values | other.values)

    def __and__(self, other: Ignored) -> Ignored:  # two reads, one under each
        if self.negative and other.negative:
            return Ignored(negative=True)
        both = {v for v in self.values | other.values if self.admits(v) and other.admits(v)}
        return Ignored(values=frozenset(both))

    def __bool__(self) -> bool:
        return self.negative or bool(self.values)

    @property
    def drawn(self) -> int:
        """An ignored entry, for a check's random inputs: -1, or the least of ``values``."""
        return -1 if self.negative else min(self.values)


Guard = tuple[sp.Indexed, Ignored]  # a read X[i] and what a branch ignores of it
# a op b is b op' a
_FLIPPED = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "==": "==", "!=": "!="}


def guard_of(cond: sp.Basic) -> tuple[Guard | None, Guard | None]:
    """The int read X[i] that ``cond`` proves an index in where()'s first branch, and the one
    it proves so in the second, each with the entries it ignores there; None where it proves
    none.

    ``X[i] >= 0`` and ``X[i] > -1`` guard the first branch, however written (``0 <= X[i]``,
    ``-1 < X[i]``, ``X[i] >= 1``); ``X[i] < 0`` and ``X[i] <= -1`` the second, as in
    ``where(X[i] < 0, 0, lp[n, X[i]])``: any negative entry is ignored. Only the first two
    spellings were known, and the others refused an ignored -1 at every call as outside the
    axis (found by probing). An (in)equality with a negative integer is a guard of its own
    (:func:`_unequal_guard`)."""
    cond = _read_against_integer(cond)
    if isinstance(cond, (sp.Equality, sp.Unequality)):
        return _unequal_guard(cond)
    if not isinstance(cond, (sp.GreaterThan, sp.StrictGreaterThan, sp.LessThan, sp.StrictLessThan)):
        return None, None
    lhs, rhs, op = cond.lhs, cond.rhs, cond.rel_op
    if isinstance(rhs, sp.Indexed) and lhs.is_Integer:  # 0 <= X[i] is X[i] >= 0
        lhs, rhs, op = rhs, lhs, _FLIPPED[op]
    if not (isinstance(lhs, sp.Indexed) and rhs.is_Integer):
        return None, None
    # X > c is X >= c + 1 on integers; X <= c is X < c + 1
    low = {">=": rhs, ">": rhs + 1}.get(op)  # the first branch has X >= low
    high = {"<": rhs, "<=": rhs + 1}.get(op)  # the second branch has X >= high
    guard = (lhs, Ignored(negative=True))
    first = guard if low is not None and low >= 0 else None
    second = guard if high is not None and high >= 0 else None
    return first, second


def _read_against_integer(cond: sp.Basic) -> sp.Basic:
    """``cond`` as ``X[i] op c`` where it compares one int read, plus or minus whole numbers,
    with whole numbers (``t[n] + 1 > 0`` is ``t[n] > -1``, ``1 - t[n] != 2`` is ``t[n] !=
    -1``: guards as users write them, found by probing); ``cond`` itself otherwise."""
    if not isinstance(cond, sp.core.relational.Relational):
        return cond
    d = sp.expand(cond.lhs - cond.rhs)
    reads = [r for r in d.atoms(sp.Indexed) if r.base.is_integer]
    if len(reads) != 1:
        return cond
    (x,) = reads
    k, c = d.coeff(x), d.subs(x, 0)
    if k not in (1, -1) or not c.is_Integer or sp.expand(k * x + c - d) != 0:
        return cond
    op = cond.rel_op if k == 1 else _FLIPPED[cond.rel_op]
    return sp.Rel(x, -c if k == 1 else c, op, evaluate=False)


def _unequal_guard(cond: sp.Equality | sp.Unequality) -> tuple[Guard | None, Guard | None]:
    """``X[i] != c`` (``c != X[i]``; SymPy's ``Ne``) with c a negative integer guards the
    first branch, ``X[i] == c`` the second, ignoring c alone: cross-entropy's ignore_index
    written as users write it, ``where(t[n] != -1, x[n, t[n]], 0)``. A -2 there would be read,
    so the range check admits exactly c outside the axis, on every device before any kernel
    (the clamped read hides a -2 from the kernels' own checks). A c of 0 or more is no guard:
    an entry c inside the axis is read as it is, one past it is refused with every other."""
    a, b = cond.args
    if isinstance(b, sp.Indexed) and a.is_Integer:
        a, b = b, a
    if not (isinstance(a, sp.Indexed) and b.is_Integer and b < 0):
        return None, None
    guard = (a, Ignored(values=frozenset({int(b)})))
    return (guard, None) if isinstance(cond, sp.Unequality) else (None, guard)


def data_guards(g) -> dict[str, Ignored]:
    """Int inputs whose every use as a subscript sits in a branch of where() that a guard
    (:func:`guard_of`) proves an index in, with the entries outside the axis those guards
    ignore (the ones every read ignores): a negative entry, or the one value of ``t != -1``,
    marks a position to ignore (cross-entropy's ignore_index), so it is read as index 0 (any
    in range; the where discards it) and not refused as out of range."""
    if getattr(g, "guarded", None) is not None:
        return dict(g.guarded)
    reads: dict[str, list[Ignored | None]] = {}

    def walk(e: sp.Basic, guards: dict) -> None:
        if isinstance(e, where):
            walk(e.args[0], guards)
            for branch, guard in zip(e.args[1:], guard_of(e.args[0]), strict=True):
                walk(branch, guards if guard is None else _under(guards, *guard))
            return
        if isinstance(e, (sp.Indexed, sp.KroneckerDelta)):
            subs = e.indices if isinstance(e, sp.Indexed) else e.args
            for sub in subs:
                if isinstance(sub, sp.Indexed):
                    reads.setdefault(sub.base.label.name, []).append(guards.get(sub))
        for a in e.args:
            walk(a, guards)

    for step in g.steps:
        if hasattr(step, "body"):
            walk(step.body, {})
    found = {}
    for name, ignored in reads.items():
        if all(ignored):
            every = functools.reduce(operator.and_, ignored)
            if every:
                found[name] = every
    return found


def _under(guards: dict, read: sp.Indexed, ignored: Ignored) -> dict:
    """The guards of a branch inside another's: a read ignores what either guard does."""
    return {**guards, read: guards[read] | ignored if read in guards else ignored}


def guarded_data(g) -> set[str]:
    """The int inputs read clamped (:func:`data_guards`)."""
    return set(data_guards(g))
