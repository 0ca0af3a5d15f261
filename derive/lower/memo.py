"""How a lowering remembers what it computed: each tensor under a key that does not depend on
the names of its indices, so the same reduction met again (under other bound names, or dk's
sum as dq's with two free indices swapped) is read, not computed twice.

In: SymPy expressions and the :class:`~derive.lower.value.Value` bound for them; out: memo keys
and entries, and :class:`Computed`, the read-only view a fusion's match gets.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Collection, Iterator, Mapping

import sympy as sp

from derive.lower.value import Value
from derive.symbolic.indices import bound_by_depth, free_indices


def memo_key(e: sp.Expr) -> sp.Expr:
    """``e`` with its bound indices renamed canonically: the same reduction under other bound
    names is the same tensor (free names kept; :func:`canonical` renames those too)."""
    return bound_by_depth(e)


PERMUTATIONS = 120  # free indices are matched up to renaming while that many orders suffice


@functools.lru_cache(maxsize=1 << 12)
def canonical(e: sp.Expr) -> tuple[sp.Expr, dict[sp.Symbol, sp.Symbol]]:
    """``e`` with bound and free indices renamed canonically, and the free renaming.

    The same reduction under other bound names is the same tensor; so is the same tensor under
    other free names (dq's ``sum_d v[b, h, t1, d] dy[b, h, t, d]`` is dk's with t and t1
    swapped): either is computed once. Free indices take the placeholder order whose printed
    key is least (tried over every order, up to :data:`PERMUTATIONS`); the renaming maps the
    value's axes to the key's and back.
    """
    e = bound_by_depth(e)
    free = sorted(free_indices(e), key=str)
    if math.factorial(len(free)) > PERMUTATIONS:
        return e, {}
    best = None
    for order in itertools.permutations(range(len(free))):
        rename = {s: sp.Symbol(f"_f{k}", integer=True) for s, k in zip(free, order)}
        key = e.xreplace(rename)
        text = str(key)
        if best is None or text < best[0]:
            best = (text, key, rename)
    return (best[1], best[2]) if best else (e, {})


def recall(memo: Mapping[tuple, Value], e: sp.Expr) -> Value | None:
    """The tensor ``memo`` holds for ``e`` (under any names of its indices), on e's axes.

    A memo maps ``("renamed", key)`` (:func:`canonical`: a value whose axes are exactly e's
    free indices, stored on the placeholders) or ``("named", memo_key(e))`` (broadcast, or
    axes labelled by data: e's own names) to the value bound for it.
    """
    key, rename = canonical(e)
    v = memo.get(("renamed", key))
    if v is None:
        return memo.get(("named", memo_key(e)))  # remembered under its own names
    back = {p: a for a, p in rename.items()}
    return Value(v.code, tuple(back[a] for a in v.axes), v.prec, v.scalar)


def memo_entry(e: sp.Expr, v: Value) -> tuple[tuple, Value]:
    """The ``(key, value)`` under which a memo remembers ``v`` as the value of ``e``."""
    key, rename = canonical(e)
    if set(v.axes) == set(rename):
        axes = tuple(rename[a] for a in v.axes)
        return ("renamed", key), Value(v.code, axes, v.prec, v.scalar)
    return ("named", memo_key(e)), v


def repeated_sums(exprs: list[sp.Expr]) -> set[sp.Expr]:
    """The canonical keys (:func:`canonical`) of the sums met more than once in ``exprs``, under
    any index names; a repeated sum's own sums are counted once, at its first occurrence."""
    seen: set[sp.Expr] = set()
    repeated: set[sp.Expr] = set()

    def walk(e: sp.Basic) -> None:
        if isinstance(e, sp.Sum):
            key = canonical(e)[0]
            if key in seen:
                repeated.add(key)
                return
            seen.add(key)
        for a in e.args:
            walk(a)

    for e in exprs:
        walk(e)
    return repeated


class Computed(Collection):
    """The sums (and grouped factors) a lowering has computed, as a fusion's match may read
    them: ``e in computed`` holds when ``e``, under any names of its indices, has a tensor
    (:func:`recall`). A read-only view of the lowerer's memo."""

    def __init__(self, memo: Mapping[tuple, Value]) -> None:
        self._memo = memo

    def __contains__(self, e: object) -> bool:
        return isinstance(e, sp.Basic) and recall(self._memo, e) is not None

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._memo)

    def __len__(self) -> int:
        return len(self._memo)
