"""The one bound-index renamer (``derive.symbolic.indices.rename_bound``) and its namers."""

from __future__ import annotations

import sympy as sp
from sympy.concrete import expr_with_limits

from derive.language import ReduceMax
from derive.lower.memo import memo_key
from derive.sums import has_piecewise
from derive.symbolic.indices import Fresh, canonical_bound, freshen_bound, has_reduction

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


def test_reduction_and_piecewise_lookups_agree_with_sympy() -> None:
    # the memoised walks (indices.has_reduction, sums.has_piecewise) answer as SymPy's has does
    k, n = sp.symbols("k n", integer=True)
    x = sp.IndexedBase("x")
    inner = sp.Sum(x[k, n], (k, 0, 3))
    for e in (x[n], inner, sp.tanh(inner) + x[n], ReduceMax(x[k, n], (k, 0, 3)) * 2):
        assert has_reduction(e) == e.has(sp.Sum, ReduceMax)
        assert not has_piecewise(e)
    assert has_piecewise(x[n] + sp.Piecewise((x[k, n], k > n), (0, True)))


def test_a_sum_is_built_as_sympy_builds_it() -> None:
    # sums._common_new skips SymPy's Piecewise fold only where the body holds no Piecewise
    k, n = sp.symbols("k n", integer=True)
    x = sp.IndexedBase("x")
    sympy_common_new = expr_with_limits._common_new.__wrapped__
    for body in (
        x[k] * x[n],
        sp.Sum(x[k, n], (n, 0, 3)) * x[k],
        sp.Piecewise((x[k], k > n), (0, True)) * x[n],  # folded: SymPy's own code
        sp.Piecewise((x[n], n > 2), (1, True)) * x[k],  # no k inside: masked, not folded
        sp.Sum(x[k], (k, 0, 3)),  # a Sum of a Sum: denested
    ):
        built = sp.Sum(body, (k, 0, 3))
        function, limits, _ = sympy_common_new(sp.Sum, body, (k, 0, 3), discrete=True)
        assert built.args == (function, *limits)
