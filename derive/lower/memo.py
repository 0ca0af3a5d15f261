"""How a lowering remembers what it computed: each tensor under a key that does not depend on
the names of its indices, so the same reduction met again (under other bound names, or dk's
sum as dq's with two free indices swapped) is read, not computed twice.

In: SymPy expressions and the IR node (:mod:`derive.ir.nodes`) bound for them; out: memo keys
and entries, and :class:`Computed`, the read-only view a fusion's match gets.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Collection, Iterator, Mapping

import sympy as sp

from derive.ir import nodes as ir
from derive.symbolic.indices import bound_by_depth, free_indices, indexed_atoms


def memo_key(e: sp.Expr) -> sp.Expr:
    """``e`` with its bound indices renamed canonically: the same reduction under other bound
    names is the same tensor (free names kept; :func:`canonical` renames those too)."""
    return bound_by_depth(e)


PERMUTATIONS = 120  # free indices are matched up to renaming while that many orders suffice
# ... and while trying them prints no more than this many characters: a large expression (the
# double backward's, fuzz seed 1099: 0.5 s a key) keeps its free names instead
PRINTED = 200_000


def _roles(e: sp.Expr, free: set[sp.Symbol]) -> dict[sp.Symbol, tuple[str, ...]]:
    """What each free index does in ``e``, in terms no renaming changes: the tensor axes it
    subscripts (``("v", 3)``: v's fourth axis; a subscript expression it is part of is marked)
    and the kinds of node it is a direct argument of (``KroneckerDelta``, ``LessThan``)."""
    roles: dict[sp.Symbol, set[str]] = {s: set() for s in free}
    seen: set[sp.Basic] = set()
    todo: list[sp.Basic] = [e]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if isinstance(node, sp.Indexed):
            for pos, index in enumerate(node.indices):
                for s in index.free_symbols & free:
                    roles[s].add(repr((node.base.label.name, pos, index == s)))
        else:
            for a in node.args:
                if a in roles:
                    roles[a].add(type(node).__name__)
        todo.extend(node.args)
    return {s: tuple(sorted(r)) for s, r in roles.items()}


def _orders(groups: list[list[sp.Symbol]]) -> Iterator[tuple[sp.Symbol, ...]]:
    """Every order of the free indices that keeps the groups in turn: one permutation per
    group, chained."""
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield tuple(itertools.chain.from_iterable(parts))


@functools.lru_cache(maxsize=1 << 12)
def canonical(e: sp.Expr) -> tuple[sp.Expr, dict[sp.Symbol, sp.Symbol]]:
    """``e`` with bound and free indices renamed canonically, and the free renaming.

    The same reduction under other bound names is the same tensor; so is the same tensor under
    other free names (dq's ``sum_d v[b, h, t1, d] dy[b, h, t, d]`` is dk's with t and t1
    swapped): either is computed once. Free indices are first ordered by their roles
    (:func:`_roles`, which a renaming carries along), and placeholders ``_f0, _f1, ...`` follow
    that order; only indices of equal roles can be swapped by a renaming, so only their orders
    are tried, and the one whose printed key is least is taken (up to :data:`PERMUTATIONS`
    orders and :data:`PRINTED` characters printed; past that, free names are kept). Either way
    the key is a function of ``e`` up to renaming; the renaming maps the value's axes to the
    key's and back.
    """
    e = bound_by_depth(e)
    free = free_indices(e)
    roles = _roles(e, free)
    ranked = sorted(free, key=lambda s: (roles[s], s.name))
    groups = [list(g) for _, g in itertools.groupby(ranked, key=roles.__getitem__)]
    orders = math.prod(math.factorial(len(g)) for g in groups)
    if orders > PERMUTATIONS or (orders > 1 and orders * len(str(e)) > PRINTED):
        return e, {}
    candidates = [
        (e.xreplace(rename), rename)
        for rename in (
            {s: sp.Symbol(f"_f{k}", integer=True) for k, s in enumerate(order)}
            for order in _orders(groups)
        )
    ]
    if len(candidates) == 1:  # roles alone tell every index apart: nothing to print
        return candidates[0]
    return min(candidates, key=lambda c: _structure(c[0]))


@functools.lru_cache(maxsize=1 << 16)
def _structure(e: sp.Basic) -> tuple:
    """A total order's key for ``e``: its tree as nested tuples of class names and atoms'
    text (SymPy orders the arguments of a sum or product canonically). Printing each
    candidate (``str``) sorted every sum's terms again: 40% of an op's lowering (fuzz
    --affine 4195); subtrees a renaming leaves alone are keyed once."""
    if not e.args:
        return (type(e).__name__, str(e))
    return (type(e).__name__, tuple(_structure(a) for a in e.args))


def recall(memo: Mapping[tuple, ir.Node], e: sp.Expr, sizes: Mapping) -> ir.Node | None:
    """The tensor ``memo`` holds for ``e`` (under any names of its indices), on e's axes.

    A memo maps ``("renamed", key, ranges)`` (:func:`canonical`: a value whose axes are
    exactly e's free indices, stored on the placeholders) or ``("named", memo_key(e),
    ranges)`` (broadcast, or axes labelled by data: e's own names) to the value bound for it;
    ``ranges`` are those of the free indices no subscript pins (:func:`_unpinned`).
    """
    key, rename = canonical(e)
    v = memo.get(("renamed", key, _unpinned(e, rename, sizes)))
    if v is None:  # remembered under its own names
        return memo.get(("named", memo_key(e), _unpinned(e, {}, sizes)))
    back = {p: a for a, p in rename.items()}
    return ir.relabel(v, tuple(back[a] for a in v.axes))


def memo_entry(e: sp.Expr, v: ir.Node, sizes: Mapping) -> tuple[tuple, ir.Node]:
    """The ``(key, value)`` under which a memo remembers ``v`` as the value of ``e``."""
    key, rename = canonical(e)
    if set(v.axes) == set(rename):
        axes = tuple(rename[a] for a in v.axes)
        return ("renamed", key, _unpinned(e, rename, sizes)), ir.relabel(v, axes)
    return ("named", memo_key(e), _unpinned(e, {}, sizes)), v


def _unpinned(e: sp.Expr, rename: Mapping, sizes: Mapping) -> tuple:
    """The range of each free index of ``e`` that no tensor subscript pins, by its name in
    the key: ``where(j <= k, exp(x[n]), 0)`` over J x K and ``where(a <= b, exp(x[n]), 0)``
    over A x B are one expression up to index names but two tensors (a range pinned by a
    subscript, x's n, is the tensor's own; tests/cases/one_mask_over_two_ranges.py)."""
    pinned = {
        i
        for x in indexed_atoms(e)
        for i, n in zip(x.indices, x.base.shape or (None,) * len(x.indices), strict=True)
        if isinstance(i, sp.Symbol) and _pins(sizes.get(i), n)
    }
    return tuple(
        sorted((str(rename.get(s, s)), str(sizes.get(s))) for s in free_indices(e) - pinned)
    )


def _pins(known: sp.Expr | None, size: sp.Expr | None) -> bool:
    """A subscript pins its index's range where the index's known range is the axis' own:
    ``db[r, r2]`` with r over R on an axis of V (a derivation's read, zero past the axis:
    indexing.sized_apart) is a tensor over R, and the same text with v over V another (fuzz:
    the second order of ``out[m] = Sum(b2[f - 1, kk] z[f - 1, m], f, kk)``, R read for V)."""
    return known is None or size is None or known == size or sp.expand(known - size) == 0


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

    def __init__(self, memo: Mapping[tuple, ir.Node], sizes: Mapping) -> None:
        self._memo, self._sizes = memo, sizes

    def __contains__(self, e: object) -> bool:
        return isinstance(e, sp.Basic) and recall(self._memo, e, self._sizes) is not None

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._memo)

    def __len__(self) -> int:
        return len(self._memo)
