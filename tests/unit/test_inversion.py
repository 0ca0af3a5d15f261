"""Index inversion (issue 25): the delta of an affine read solved for a summed index with
coefficient +-1, kept in range by a condition unless a zero-padded read already is 0 there;
a delta no summed index solves (a stride > 1) stays for the lowering to scatter."""

from __future__ import annotations

import sympy as sp

from derive.functions import clamp, where
from derive.symbolic.inversion import (
    delta_invert,
    delta_reads,
    delta_through_sum,
    in_range,
    keep_padding,
    solve_for,
)
from derive.symbolic.simplify import Simplifier

u, t, k, n = sp.symbols("u t k n", integer=True)
T, K, L = sp.symbols("T K L", integer=True, positive=True)
S = sp.Symbol("S", real=True)  # an int param: a stride
g = sp.IndexedBase("g", real=True, shape=(L,))
w = sp.IndexedBase("w", real=True, shape=(K,))
y = sp.IndexedBase("y", real=True)


def test_solve_for_the_index_with_coefficient_one() -> None:
    # delta(u, t + 2 k - 1) = delta(t, u - 2 k + 1)
    assert solve_for(sp.KroneckerDelta(u, t + 2 * k - 1), t) == u - 2 * k + 1
    # delta(u, 2 t - k): k = 2 t - u
    assert solve_for(sp.KroneckerDelta(u, 2 * t - k), k) == 2 * t - u


def test_a_stride_is_not_inverted() -> None:
    # delta(u, 2 t + k) has no +-1 coefficient for t, nor delta(u, S t) for a param S
    assert solve_for(sp.KroneckerDelta(u, 2 * t + k), t) is None
    assert solve_for(sp.KroneckerDelta(u, S * t), t) is None
    body = g[t] * sp.KroneckerDelta(u, 2 * t)
    assert delta_invert(body, (t, 0, L - 1), Simplifier()) is None


def test_a_plain_delta_is_the_old_rule_s() -> None:
    # delta(k, e) with e an index or data is _delta_eliminate's, unchanged
    assert solve_for(sp.KroneckerDelta(k, u), k) is None


def test_a_zero_padded_read_needs_no_condition() -> None:
    # sum_t g[t] w[k] delta(u, t + k) -> g[u - k] w[k]: g[u - k] is 0 outside [0, L)
    body = g[t] * w[k] * sp.KroneckerDelta(u, t + k)
    assert delta_invert(body, (t, 0, L - 1), Simplifier()) == g[u - k] * w[k]


def test_bounds_become_a_condition() -> None:
    # sum_t y[t] delta(u, t + 1), over t < T: y[u - 1] 1[u - 1 >= 0] 1[u - 1 <= T - 1]
    body = y[t] * sp.KroneckerDelta(u, t + 1)
    expected = where(u - 1 >= 0, 1, 0) * where(u - 1 <= T - 1, 1, 0) * y[u - 1]
    assert delta_invert(body, (t, 0, T - 1), Simplifier()) == expected


def test_a_quotient_is_kept_out_by_where() -> None:
    # 1/y[u + 1] past the end is 1/0: the condition discards it rather than multiplying it
    f = in_range(u + 1, 0, T - 1, 1 / y[u + 1])
    assert f == where(u + 1 >= 0, where(u + 1 <= T - 1, 1 / y[u + 1], 0), 0)


def test_a_body_finite_only_in_range_is_read_inside_it() -> None:
    # sum_t 1/y[t] delta(u, t + 1) -> where(0 <= u - 1 <= T - 1, 1/y[clamp(u - 1, 0, T - 1)], 0):
    # the quotient is taken at a row that exists, so it is finite where the where discards it
    # (there 1/y[u - 1] would be 1/0, NaN to a second order's 0 adjoint: fuzz --affine 1147)
    body = 1 / y[t] * sp.KroneckerDelta(u, t + 1)
    at = clamp(u - 1, 0, T - 1)
    expected = where(u - 1 >= 0, where(u - 1 <= T - 1, 1 / y[at], 0), 0)
    assert delta_invert(body, (t, 0, T - 1), Simplifier()) == expected


def test_an_inlined_body_finite_only_in_range_is_read_inside_it() -> None:
    # h[v] = exp(y[v]) inlined at h[u + 1]: exp(y[clamp(u + 1, 0, T - 1)]) where u + 1 < T; a
    # product of reads needs no clamp (an affine read past the end is 0: finite)
    v = sp.Symbol("v", integer=True)
    read = lambda body: lambda at: body.xreplace({v: at[0]})  # noqa: E731
    got = keep_padding(read(sp.exp(y[v])), (u + 1,), (T,))
    inside = sp.exp(y[clamp(u + 1, 0, T - 1)])
    assert got == where(u + 1 >= 0, where(u + 1 <= T - 1, inside, 0), 0)
    got = keep_padding(read(2 * y[v]), (u + 1,), (T,))
    assert got == where(u + 1 >= 0, 1, 0) * where(u + 1 <= T - 1, 1, 0) * 2 * y[u + 1]


def test_clamp_is_an_index_in_its_range() -> None:
    assert clamp(u, 3, 3) == 3
    assert clamp(sp.Integer(7), 0, 4) == 4 and clamp(sp.Integer(-2), 0, 4) == 0
    assert clamp(u - 1, 0, T - 1).is_integer


def test_a_delta_two_sums_deep_is_solved_by_the_outer_sum() -> None:
    # sum_t g[t] sum_k w[k] sum_n y[n] delta(t, 2 k + n) -> sum_k sum_n w[k] y[n] g[2 k + n]
    # (fuzz --windows 15070: left, an identity over (t, 2 k + n) broadcast every factor)
    inner = sp.Sum(y[n] * sp.KroneckerDelta(t, 2 * k + n), (n, 0, T - 1))
    body = g[t] * sp.Sum(w[k] * inner, (k, 0, K - 1))
    got = delta_through_sum(body, (t, 0, L - 1), Simplifier())
    assert not got.has(sp.KroneckerDelta)
    # g's read at 2 k + n is zero-padded past its L entries: no condition is needed
    assert got == sp.Sum(w[k] * sp.Sum(g[2 * k + n] * y[n], (n, 0, T - 1)), (k, 0, K - 1))


def test_sums_whose_range_follows_the_outer_index_are_not_interchanged() -> None:
    # sum_t g[t] sum_{k <= t} w[k] delta(t, k + 1): the inner range depends on t
    body = g[t] * sp.Sum(w[k] * sp.KroneckerDelta(u, t + k), (k, 0, t))
    assert delta_through_sum(body, (t, 0, L - 1), Simplifier()) is None


def test_a_read_under_a_sum_is_zero_padding_too() -> None:
    # sum_t delta(u, t - 1) sum_k w[k] q[t, k] -> sum_k w[k] q[u + 1, k]: q's read at u + 1 is 0
    # past its end inside the sum over k, so no indicator is kept (the second order of conv2d
    # kept one, and the module no longer read as a convolution)
    q = sp.IndexedBase("q", real=True, shape=(L, K))
    body = sp.Sum(w[k] * q[t, k], (k, 0, K - 1)) * sp.KroneckerDelta(u, t - 1)
    expected = sp.Sum(w[k] * q[u + 1, k], (k, 0, K - 1))
    assert delta_invert(body, (t, 0, L - 1), Simplifier()) == expected


def test_a_delta_under_a_range_guard_stands_outside_it() -> None:
    # where(c, delta(u, t) f, 0) = delta(u, t) where(c, f, 0) at every point; outside, the sum
    # over t solves it (fuzz --windows 15073: inside, the second order's delta(b, b2) under a
    # guard was an identity over (b, b2), a 7-D product)
    guarded = where(2 * t - 1 >= 0, sp.KroneckerDelta(u, t) * sp.exp(y[2 * t - 1]), 0)
    assert guarded == sp.KroneckerDelta(u, t) * where(2 * t - 1 >= 0, sp.exp(y[2 * t - 1]), 0)
    solved = Simplifier().sum(guarded, ((t, 0, T - 1),))
    assert not solved.has(sp.KroneckerDelta, sp.Sum)


def test_a_where_is_as_commutative_as_its_branches() -> None:
    # a relation's commutativity is unknown to SymPy; a where of 1/Sum(..) was then "not
    # commutative", a - where(..) "not real", and comparing it raised (fuzz --affine 4855)
    a = sp.Symbol("a", real=True)
    w = where(k >= 0, 1 / sp.Sum(y[k, t], (t, 0, T - 1)), 0)
    assert w.is_commutative
    assert (a - w).is_extended_real is not False
    assert isinstance(a - w > 0, sp.StrictGreaterThan)


def test_a_nest_no_delta_reads_t_in_is_not_interchanged(monkeypatch) -> None:
    # sum_t g[t] sum_k w[k] y[k, t] delta(u, k): no delta reads t, so no solver can solve one
    # for t at any depth; the nest is not opened to look (a product built at every level,
    # again for every sum above: a tanh MLP's double backward, a nest per layer)
    nest = sp.Sum(w[k] * y[k, t] * sp.KroneckerDelta(u, k), (k, 0, K - 1))
    assert delta_reads(g[t] * nest) == {u, k}
    built = []
    monkeypatch.setattr(
        "derive.symbolic.inversion.delta_invert", lambda *a: built.append(a) or None
    )
    assert delta_through_sum(g[t] * nest, (t, 0, L - 1), Simplifier()) is None
    assert built == []  # not opened
    # where one does (delta(u, t + k)), the nest is opened and the delta solved for t
    monkeypatch.undo()
    solvable = sp.Sum(w[k] * y[k, t] * sp.KroneckerDelta(u, t + k), (k, 0, K - 1))
    assert t in delta_reads(solvable)
    assert delta_through_sum(g[t] * solvable, (t, 0, L - 1), Simplifier()) is not None
