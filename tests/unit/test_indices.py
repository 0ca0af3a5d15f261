"""The one bound-index renamer (``derive.symbolic.indices.rename_bound``) and its namers."""

from __future__ import annotations

import sympy as sp
from sympy.concrete import expr_with_limits

from derive.language import ReduceMax
from derive.lower.memo import memo_key
from derive.sums import has_piecewise
from derive.symbolic.indices import (
    Fresh,
    bound_shape,
    canonical_bound,
    freshen_bound,
    has_reduction,
    replace_apart,
)

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


def test_a_substituted_position_never_captures_an_inner_bound_index() -> None:
    # a scatter's position b = y[n] put into sum_n x[b, n]: xreplace reads the diagonal
    # x[y[n], n] (fuzz 1030111); apart, the inner n is renamed first
    e = sp.Sum(x[b, n], (n, 0, N - 1)) * y[a]
    put = replace_apart(e, {b: y[n], a: n})
    n1 = sp.Symbol("n1", integer=True)
    assert put == sp.Sum(x[y[n], n1], (n1, 0, N - 1)) * y[n]
    assert e.xreplace({b: y[n], a: n}) != put  # what the plain substitution did
    # a key bound inside is no free index of it: left alone, renamed apart
    inner = sp.Sum(x[b, a], (a, 0, N - 1))
    assert replace_apart(inner, {a: c}) == inner.xreplace({a: sp.Symbol("a1", integer=True)})


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


def _shape(e: sp.Expr) -> object:
    return bound_shape(e, frozenset(e.free_symbols))


def test_expressions_equal_up_to_bound_names_share_a_shape() -> None:
    """bound_shape is a pre-filter for canonical_bound: whatever the renaming makes equal
    must share a shape, including what SymPy merges once the names agree (a product of two
    equal sums is a square, exp(u) exp(u) is exp(2 u)) and a name bound inside a sum that is
    free outside it."""
    i, j, k = sp.symbols("i j k", integer=True)
    N = sp.Symbol("N", integer=True, positive=True)
    x, y = sp.IndexedBase("x"), sp.IndexedBase("y")
    pairs = [
        (x[i] * sp.Sum(y[i], (i, 0, N - 1)), x[i] * sp.Sum(y[k], (k, 0, N - 1))),
        (
            sp.Sum(x[i], (i, 0, N - 1)) * sp.Sum(x[j], (j, 0, N - 1)),
            sp.Sum(x[k], (k, 0, N - 1)) ** 2,
        ),
        (
            sp.exp(sp.Sum(x[i], (i, 0, N - 1))) * sp.exp(sp.Sum(x[j], (j, 0, N - 1))),
            sp.exp(2 * sp.Sum(x[k], (k, 0, N - 1))),
        ),
        (
            sp.KroneckerDelta(j, i) * sp.Sum(y[k, i], (k, 0, N - 1)),
            sp.KroneckerDelta(i, j) * sp.Sum(y[j, i], (j, 0, N - 1)),
        ),
    ]
    for a, b in pairs:
        if canonical_bound(a, a.free_symbols) == canonical_bound(b, b.free_symbols):
            assert _shape(a) == _shape(b), (a, b)
    # and what no renaming makes equal is told apart where it can be: another tensor, a free
    # index in another place
    assert _shape(sp.Sum(x[i, j], (i, 0, N - 1))) != _shape(sp.Sum(x[j, i], (i, 0, N - 1)))
    assert _shape(sp.Sum(x[i], (i, 0, N - 1))) != _shape(sp.Sum(y[i], (i, 0, N - 1)))


def test_the_shape_filter_misses_no_merge_the_renaming_makes(monkeypatch) -> None:
    """Derive ops whose simplification merges renamed sums (softmax's counts / counts_sum
    folds back to out only so), every call of the filter checked against the full renaming
    of every part: a part another part equals up to bound names is never skipped."""
    from collections import Counter
    from pathlib import Path

    from derive.emit.generate import load_op, module_source
    from derive.symbolic import simplify

    alike, calls = simplify._alike, []

    def checked(parts: list[sp.Expr]) -> set[int]:
        got = alike(parts)
        keys = [canonical_bound(p, p.free_symbols) for p in parts]
        seen = Counter(keys)
        calls.append(parts)
        assert {id(p) for p, key in zip(parts, keys) if seen[key] > 1} <= got, parts
        return got

    monkeypatch.setattr(simplify, "_alike", checked)
    root = Path(__file__).resolve().parents[2]
    for name in ("softmax", "layernorm"):
        module_source(load_op(root / "ops" / f"{name}.py"), "out")
    assert calls
