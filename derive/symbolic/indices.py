"""Index bookkeeping shared by every stage: fresh names, bound variables, sums, atoms.

Adjoints are built by substituting expressions into Sums; without care a bound index of the
inserted expression captures an index of the host. Everything here keeps names apart and
deterministic (counters, never hashes), so regeneration is byte-identical.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable

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


def freshen_bound(expr: sp.Expr, fresh: Fresh) -> sp.Expr:
    """Rename every bound index of ``expr`` to a fresh symbol (no capture on substitution).

    One pass, outermost reduction first: renaming level by level would rebuild a nest of d
    reductions d times.
    """

    def walk(e: sp.Basic, env: dict) -> sp.Basic:
        if not e.args:
            return env.get(e, e)
        if not is_reduction(e):
            return e.func(*[walk(a, env) for a in e.args])
        new = [fresh() for _ in e.limits]
        body = walk(e.function, {**env, **{lim[0]: v for lim, v in zip(e.limits, new)}})
        return e.func(body, *[(v, lo, hi) for v, (_, lo, hi) in zip(new, e.limits, strict=True)])

    if not isinstance(expr, sp.Basic) or not expr.has(sp.Sum, ReduceMax):
        return expr
    return walk(expr, {})


@functools.lru_cache(maxsize=1 << 16)
def indexed_atoms(expr: sp.Basic) -> frozenset[sp.Indexed]:
    """``expr.atoms(sp.Indexed)``, once per distinct sub-expression (a shared subtree of a large
    adjoint is visited once, not once per occurrence)."""
    found = frozenset([expr]) if isinstance(expr, sp.Indexed) else frozenset()
    return found.union(*[indexed_atoms(a) for a in expr.args])


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


def canonical_bound(expr: sp.Expr, free: Iterable[sp.Symbol]) -> sp.Expr:
    """Rename bound indices readably and deterministically (range N -> n, n1, ...).

    Identical reductions get identical names, which lets lowering share them (CSE).
    """
    taken = {str(s) for s in free}

    def walk(e: sp.Basic, used: set[str]) -> sp.Basic:
        if not isinstance(e, sp.Basic) or not e.args:
            return e
        if is_reduction(e):
            body, limits, inner = e.function, [], set(used)
            for var, lo, hi in e.limits:
                (new,) = nice_indices([hi + 1 if isinstance(hi + 1, sp.Symbol) else hi], inner)
                inner.add(str(new))
                body = body.xreplace({var: new})
                limits.append((new, lo, hi))
            return e.func(walk(body, inner), *limits)
        return e.func(*[walk(a, used) for a in e.args])

    return walk(expr, taken)
