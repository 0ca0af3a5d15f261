"""The one bound-index renamer (``derive.symbolic.indices.rename_bound``) and its namers."""

from __future__ import annotations

import sympy as sp

from derive.language import ReduceMax
from derive.lower.memo import memo_key
from derive.symbolic.indices import Fresh, canonical_bound, freshen_bound

N = sp.Symbol("N", integer=True, positive=True)
a, b, n, c = sp.symbols("a b n c", integer=True)
x, y = sp.IndexedBase("x"), sp.IndexedBase("y")


def _value(e: sp.Expr) -> sp.Expr:
    """``e`` evaluated on a 3 x 3 x and y of distinct primes: equal iff the same sum."""
    primes = iter(sp.primerange(2, 100))
    table = {x[i, j]: next(primes) for i in range(3) for j in range(3)}
    table.update({y[i]: next(primes) for i in range(3)})
    return e.subs(N, 3).doit().xreplace(table)


def test_a_readable_name_never_captures_an_inner_bound_index() -> None:
    # sum_a y[a] sum_n x[a, n]: renaming a -> n by xreplace would read the diagonal x[n1, n1]
    e = sp.Sum(sp.Sum(x[a, n], (n, 0, N - 1)) * y[a], (a, 0, N - 1))
    renamed = canonical_bound(e, [])
    assert renamed == sp.Sum(
        y[n]
        * sp.Sum(x[n, sp.Symbol("n1", integer=True)], (sp.Symbol("n1", integer=True), 0, N - 1)),
        (n, 0, N - 1),
    )
    assert _value(renamed) == _value(e)


def test_readable_names_avoid_free_indices_even_undeclared_ones() -> None:
    # c is free in the sum but not passed as free: the bound index over C must not become c
    C = sp.Symbol("C", integer=True, positive=True)
    renamed = canonical_bound(sp.Sum(x[c, b], (b, 0, C - 1)), [])
    assert renamed == sp.Sum(
        x[c, sp.Symbol("c1", integer=True)], (sp.Symbol("c1", integer=True), 0, C - 1)
    )


def test_memo_keys_ignore_bound_names_and_factor_order() -> None:
    one = sp.Sum(x[a, n] * y[n], (n, 0, N - 1))
    two = sp.Sum(y[b] * x[a, b], (b, 0, N - 1))
    assert memo_key(one) == memo_key(two)
    assert memo_key(ReduceMax(x[a, n], (n, 0, N - 1))) == memo_key(
        ReduceMax(x[a, b], (b, 0, N - 1))
    )
    assert memo_key(one) != memo_key(sp.Sum(x[n, a] * y[n], (n, 0, N - 1)))


def test_fresh_names_keep_shadowing_as_sympy_reads_it() -> None:
    # the inner sum rebinds n: its x[a, n] is the inner n, the outer y[n] the outer one
    e = sp.Sum(sp.Sum(x[a, n], (n, 0, N - 1)) * y[n], (n, 0, N - 1))
    fresh = freshen_bound(e, Fresh())
    assert len({lim[0] for s in fresh.atoms(sp.Sum) for lim in s.limits}) == 2
    assert _value(fresh.subs(a, 1)) == _value(e.subs(a, 1))
