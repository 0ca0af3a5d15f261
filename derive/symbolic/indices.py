"""Index bookkeeping shared by every stage: fresh names, bound variables, sums, atoms.

Adjoints are built by substituting expressions into Sums; without care a bound index of the
inserted expression captures an index of the host. Everything here keeps names apart and
deterministic (counters, never hashes), so regeneration is byte-identical.
"""

from __future__ import annotations

import collections
import functools
import itertools
import operator
from collections.abc import Callable, Iterable

import sympy as sp

from derive.language import ReduceMax


class Fresh:
    """Deterministic fresh index symbols ``_i0, _i1, ...`` for internal bookkeeping."""

    def __init__(self) -> None:
        self._count = itertools.count()

    def __call__(self) -> sp.Symbol:
        return sp.Symbol(f"_i{next(self._count)}", integer=True)


def is_reduction(e: sp.Basic) -> bool:
    return isinstance(e, (sp.Sum, ReduceMax))


@functools.lru_cache(maxsize=1 << 16)
def has_reduction(e: sp.Basic) -> bool:
    """``e.has(sp.Sum, ReduceMax)``, once per distinct sub-expression: the renamer asks it of
    every node it passes, and SymPy's ``has`` walks the node's whole subtree each time."""
    return is_reduction(e) or any(has_reduction(a) for a in e.args)


# How a reduction's bound indices are renamed: its limits, its nesting depth and the names
# already in scope there (free indices and the enclosing reductions' new names) -> new symbols.
Namer = Callable[[tuple, int, frozenset[str]], list[sp.Symbol]]


def rename_bound(expr: sp.Basic, namer: Namer, taken: Iterable[str] = ()) -> sp.Basic:
    """Every bound index of ``expr`` renamed by ``namer``, in one pass, outermost first.

    The one renamer of the engine (fresh names for substitution, readable names for people,
    depth names for memo keys differ only in the namer). It cannot capture: a bound index is
    replaced through an environment applied at the leaves, never by ``xreplace`` on a body
    that may bind the same name again (``sum_a y[a] sum_n x[a, n]`` renamed a -> n naively
    reads the diagonal ``x[n1, n1]``).
    """

    def walk(e: sp.Basic, env: dict, depth: int, scope: frozenset[str]) -> sp.Basic:
        if not e.args:
            return env.get(e, e)
        if not is_reduction(e):
            if not has_reduction(e) and not (env and symbol_atoms(e) & env.keys()):
                return e
            args = [walk(a, env, depth, scope) for a in e.args]
            # rebuilt only where a name changed: SymPy's constructors sort and evaluate again
            # (an exp asks its argument's assumptions), and rename_apart's namer keeps every
            # name but the clashing ones
            return e if all(map(operator.is_, args, e.args)) else e.func(*args)
        new = namer(e.limits, depth, scope)
        inner = {**env, **{lim[0]: v for lim, v in zip(e.limits, new, strict=True)}}
        body = walk(e.function, inner, depth + 1, scope | {str(v) for v in new})
        if body is e.function and all(v == lim[0] for v, lim in zip(new, e.limits, strict=True)):
            return e
        return e.func(body, *[(v, lo, hi) for v, (_, lo, hi) in zip(new, e.limits, strict=True)])

    if not isinstance(expr, sp.Basic) or not has_reduction(expr):
        return expr
    return walk(expr, {}, 0, frozenset(taken))


def factors(e: sp.Expr) -> list[sp.Expr]:
    """The factors of a product; anything else is its own one factor."""
    return list(e.args) if isinstance(e, sp.Mul) else [e]


def without(items: Iterable, item: object) -> list:
    """``items`` less one occurrence of ``item`` (the very object): a product built
    unevaluated may hold a factor twice, ``w * w``, and filtering by identity dropped both
    (fuzz 991108: a where() factor squared lost in the second order, silently)."""
    items = list(items)
    k = next(i for i, x in enumerate(items) if x is item)
    return items[:k] + items[k + 1 :]


def substitute_apart(expr: sp.Expr, k: sp.Symbol, value: sp.Expr) -> sp.Expr:
    """``expr`` with the free index k replaced by ``value``, no index of ``value`` captured.

    A bound index of ``expr`` that ``value`` names is renamed apart first: solving a delta
    for l gives l = step*b - u, and the body's own ``sum_b hid[step*b - l]`` must read
    ``sum_b1 hid[step*b1 - step*b + u]``, not the diagonal ``sum_b hid[u]`` (fuzz --affine 225).
    New names are the old one with a number, none that ``expr`` or ``value`` already uses.
    """
    return _subscripts_expanded(replace_apart(expr, {k: value}), value)


def replace_apart(expr: sp.Expr, mapping: dict[sp.Symbol, sp.Expr]) -> sp.Expr:
    """``expr`` with each free index of ``mapping`` replaced by its value at once, no index of
    a value captured and no bound index of the same name replaced: a bound index of ``expr``
    named by a value or a key is renamed apart first (:func:`substitute_apart`'s rule, for
    several indices). A scatter's position put into its source, ``y = X[b1]`` into
    ``sigmoid(sum_b1 x[b1, y])``, read the diagonal ``x[b1, X[b1]]`` by a plain
    ``xreplace`` (fuzz 1030111: a gradient 0.3 off, silently)."""
    clash = set(mapping).union(*(v.free_symbols for v in mapping.values()))
    return rename_apart(expr, clash).xreplace(mapping)


def rename_apart(expr: sp.Expr, clash: set[sp.Symbol]) -> sp.Expr:
    """``expr`` with each bound index named in ``clash`` renamed: the old name with a
    number, none that ``expr`` or ``clash`` already uses."""
    if not clash & bound_indices(expr):
        return expr
    taken = {str(a) for a in expr.atoms(sp.Symbol)} | {str(a) for a in clash}

    def apart(limits: tuple, depth: int, scope: frozenset[str]) -> list[sp.Symbol]:
        names = []
        for lim in limits:
            v = lim[0]
            if v not in clash:
                names.append(v)
                continue
            n = next(n for n in itertools.count(1) if f"{v}{n}" not in taken)
            taken.add(f"{v}{n}")
            names.append(sp.Symbol(f"{v}{n}", **v.assumptions0))
        return names

    return rename_bound(expr, apart)


def _subscripts_expanded(expr: sp.Expr, value: sp.Expr) -> sp.Expr:
    """``expr`` with each subscript that ``value`` went into expanded: k = g - dil put into
    ``x[h + step*g - step*dil - step*k]`` reads ``x[h - step*(g - dil) + step*g - step*dil]``,
    which is ``x[h]``, but holds g until expanded; the lowering then finds no axis for g
    (fuzz --affine 3337: a second order refused with an engine error). Only where the value
    is an expression of indices alone; one holding a data read (k = t[n] - dil) is left as
    it was, untried."""
    if not isinstance(value, (sp.Add, sp.Mul)) or value.atoms(sp.Indexed):
        return expr
    reads = {
        x: x.func(x.base, *[sp.expand(i) if i.has(*value.free_symbols) else i for i in x.indices])
        for x in expr.atoms(sp.Indexed)
    }
    return expr.xreplace({x: y for x, y in reads.items() if x != y})


def bound_indices(expr: sp.Basic) -> set[sp.Symbol]:
    """The indices the sums and maximums inside ``expr`` run over."""
    return {lim[0] for r in expr.atoms(sp.Sum, ReduceMax) for lim in r.limits}


def freshen_bound(expr: sp.Expr, fresh: Fresh) -> sp.Expr:
    """Rename every bound index of ``expr`` to a fresh symbol (no capture on substitution)."""
    return rename_bound(expr, lambda limits, depth, scope: [fresh() for _ in limits])


@functools.lru_cache(maxsize=1 << 12)
def bound_by_depth(expr: sp.Expr) -> sp.Expr:
    """Bound indices named by nesting depth (``_s0_0``, ``_s1_0``): names that depend neither on
    the order SymPy keeps a product's factors in nor on the free names, so the same reduction
    under other bound (or, renamed after, free) names gets the same key. A function of ``expr``
    alone, so kept per distinct expression (lowering asks it of the same sums again and again)."""

    def by_depth(limits: tuple, depth: int, scope: frozenset[str]) -> list[sp.Symbol]:
        return [sp.Symbol(f"_s{depth}_{k}", integer=True) for k in range(len(limits))]

    return rename_bound(expr, by_depth)


@functools.lru_cache(maxsize=1 << 16)
def indexed_atoms(expr: sp.Basic) -> frozenset[sp.Indexed]:
    """``expr.atoms(sp.Indexed)``, once per distinct sub-expression (a shared subtree of a large
    adjoint is visited once, not once per occurrence)."""
    found = frozenset([expr]) if isinstance(expr, sp.Indexed) else frozenset()
    return found.union(*[indexed_atoms(a) for a in expr.args])


def free_indices(expr: sp.Basic) -> set[sp.Symbol]:
    """The index symbols free in ``expr``: integer symbols that are neither sizes (those are
    positive) nor the names of the tensors it reads."""
    labels = {i.base.label for i in indexed_atoms(expr)}
    return {
        s
        for s in expr.free_symbols
        if type(s) is sp.Symbol and s not in labels and s.is_integer and not s.is_positive
    }


@functools.lru_cache(maxsize=1 << 16)
def symbols_outside_entries(expr: sp.Basic) -> frozenset[sp.Symbol]:
    """The symbols free in ``expr`` outside every tensor entry (``t`` and ``T`` of ``x[t + 1,
    y[n]] + T``, not ``n``), once per distinct sub-expression: what ``expr.xreplace`` of each
    entry by a Dummy leaves free, without rebuilding ``expr`` (30 ms a condition of a large
    second order, SymPy's constructors asking assumptions again)."""
    if isinstance(expr, sp.Indexed):
        return frozenset()
    if isinstance(expr, sp.Symbol):
        return frozenset([expr])
    if is_reduction(expr):
        bound = {lim[0] for lim in expr.limits}
        ends = [symbols_outside_entries(end) for lim in expr.limits for end in lim[1:]]
        return (symbols_outside_entries(expr.function) - bound).union(*ends)
    return frozenset().union(*[symbols_outside_entries(a) for a in expr.args])


@functools.lru_cache(maxsize=1 << 16)
def symbol_atoms(expr: sp.Basic) -> frozenset[sp.Symbol]:
    """``expr.atoms(sp.Symbol)``, once per distinct sub-expression."""
    found = frozenset([expr]) if isinstance(expr, sp.Symbol) else frozenset()
    return found.union(*[symbol_atoms(a) for a in expr.args])


def substitute(expr: sp.Basic, rule: dict) -> sp.Basic:
    """``expr.xreplace(rule)`` visiting each distinct sub-expression once: an adjoint of a long
    chain is a DAG whose tree (what xreplace walks) is far larger."""
    memo: dict[sp.Basic, sp.Basic] = {}

    def walk(e: sp.Basic) -> sp.Basic:
        if e in rule:
            return rule[e]
        if not e.args:
            return e
        if e not in memo:
            args = [walk(a) for a in e.args]
            changed = any(new is not old for new, old in zip(args, e.args, strict=True))
            memo[e] = e.func(*args) if changed else e
        return memo[e]

    return walk(expr) if rule else expr


def top_indexed(expr: sp.Expr) -> list[sp.Indexed]:
    """Indexed atoms of ``expr`` that are not inside a Sum or Max, in a stable order."""
    found: list[sp.Indexed] = []

    def walk(e: sp.Basic) -> None:
        if isinstance(e, sp.Indexed):
            found.append(e)
        elif not is_reduction(e):
            for a in e.args:
                walk(a)

    walk(expr)
    return sorted(set(found), key=sp.default_sort_key)


def top_reductions(expr: sp.Expr) -> list[sp.Expr]:
    """Sum/Max sub-expressions of ``expr`` not nested in another one."""
    found: list[sp.Expr] = []

    def walk(e: sp.Basic) -> None:
        if is_reduction(e):
            found.append(e)
        else:
            for a in e.args:
                walk(a)

    walk(expr)
    return sorted(set(found), key=sp.default_sort_key)


def nice_indices(dims: Iterable[sp.Expr], taken: set[str] = frozenset()) -> tuple[sp.Symbol, ...]:
    """Readable free indices for a tensor's axes: N -> n, (N, N) -> (n, n1)."""
    used = set(taken)
    out = []
    for d in dims:
        stem = str(d).lower() if isinstance(d, sp.Symbol) else "i"
        name = stem
        for k in itertools.count(1):
            if name not in used:
                break
            name = f"{stem}{k}"
        used.add(name)
        out.append(sp.Symbol(name, integer=True))
    return tuple(out)


# the arguments whose order a rebuild may change (SymPy sorts them by their names)
UNORDERED = (sp.KroneckerDelta, sp.Max, sp.Min, sp.Eq, sp.Ne, sp.And, sp.Or)


def bound_shape(expr: sp.Basic, free: frozenset[sp.Symbol]) -> object:
    """A key that expressions equal up to the names of their bound indices share, built
    without renaming them: :func:`canonical_bound` rebuilds every node under a reduction (half
    of a large second order's derivation, fuzz --windows 12551), where most terms it is asked
    to compare have no equal. Only expressions with one key are renamed and compared.

    A name not in ``free`` (a bound index) is one token; a sum's and a product's arguments are
    a multiset, with coefficients and powers merged as SymPy merges them once names agree
    (``sum_i x[i] sum_j x[j]`` is ``(sum_n x[n])**2`` renamed); so are the arguments of a
    symmetric node (a delta, a Max). Meant to be coarser than equality up to renaming; where
    SymPy's rebuild would do more than these merges (a difference inside a factor that
    cancels to 0 once renamed), two equal expressions may get two keys: a merge missed, an
    expression left correct but less simplified, never a wrong merge (equal keys are only
    a reason to compare). ``tests/unit/test_indices.py`` checks the filter against the full
    renaming on real derivations.
    """
    return _shape(expr, free)


@functools.lru_cache(maxsize=1 << 16)
def _shape(e: sp.Basic, free: frozenset[sp.Symbol]) -> object:
    if isinstance(e, sp.Symbol):
        return e if e in free else "_bound"
    if not e.args:
        return e
    if is_reduction(e):  # its own indices are bound inside it, whatever is free outside
        inner = free - {lim[0] for lim in e.limits}
        ranges = tuple((_shape(lo, free), _shape(hi, free)) for _, lo, hi in e.limits)
        return (type(e).__name__, _shape(e.function, inner), ranges)
    if isinstance(e, sp.Add):
        terms: dict[object, sp.Expr] = {}
        for a in e.args:
            c, rest = a.as_coeff_Mul()
            key = _shape(rest, free)
            terms[key] = terms.get(key, sp.S.Zero) + c
        return ("+", frozenset((k, c) for k, c in terms.items() if c != 0))
    if isinstance(e, (sp.Mul, sp.Pow, sp.exp)):
        coef, powers = sp.S.One, {}
        for a in sp.Mul.make_args(e):
            if a.is_Number:
                coef *= a
                continue
            base, exp = a.as_base_exp()  # exp(u) is E**u: exp(u) exp(u) is exp(2 u)
            c, rest = exp.as_coeff_Mul()
            key = (_shape(base, free), _shape(rest, free))
            powers[key] = powers.get(key, sp.S.Zero) + c
        if coef == 1 and len(powers) == 1:
            (((base, rest), c),) = powers.items()
            if c == 1 and rest == 1:  # a power of one: the base itself, as SymPy writes it
                return base
        return ("*", coef, frozenset((k, c) for k, c in powers.items() if c != 0))
    args = tuple(_shape(a, free) for a in e.args)
    if isinstance(e, UNORDERED):
        return (type(e).__name__, frozenset(collections.Counter(args).items()))
    return (type(e).__name__, args)


def canonical_bound(expr: sp.Expr, free: Iterable[sp.Symbol], taken: Iterable[str] = ()) -> sp.Expr:
    """Rename bound indices readably and deterministically (range N -> n, n1, ...).

    Identical reductions get identical names, which lets lowering share them (CSE). A name
    avoids the free indices, the enclosing reductions' names and ``taken`` (the op's tensor
    and size names: ``Sum(W1[i, h] dh[n, h], h)`` beside a tensor ``h`` reads wrong).
    """

    def readable(limits: tuple, depth: int, scope: frozenset[str]) -> list[sp.Symbol]:
        used, out = set(scope), []
        for _, _, hi in limits:
            (new,) = nice_indices([hi + 1 if isinstance(hi + 1, sp.Symbol) else hi], used)
            used.add(str(new))
            out.append(new)
        return out

    if not isinstance(expr, sp.Basic):
        return expr
    return rename_bound(expr, readable, {str(s) for s in (*free, *free_indices(expr))} | set(taken))
