"""The double backward's terms are given on the cotangents they are reached from.

``derive.symbolic.seeds.gated`` on hand-made adjoints: which terms it gives, on which
cotangents, and what it leaves alone. The values are held to the text oracle with one
cotangent alone in tests/modules/test_second_order.py (every catalogue op and case).
"""

from __future__ import annotations

import sympy as sp

from derive.symbolic.seeds import gated, given

n = sp.Symbol("n", integer=True)
N = sp.Symbol("N", integer=True, positive=True)
x, vx, vp, P, Q = (sp.IndexedBase(s, shape=(N,), real=True) for s in ("x", "v_x", "v_p", "P", "Q"))
dp = sp.IndexedBase("dp", shape=(N,), real=True)
COTANGENTS = {"v_x": 0, "v_p": 1}
NAMES = {"p": "dp", "x": "dx", "g": "dg"}


def _gated(final: dict, returned: list[str]) -> tuple[dict, bool]:
    return gated(list(final), final, NAMES, {}, COTANGENTS, returned)


def test_a_sum_of_two_cotangents_chains_gives_each_term_on_its_own():
    final = {"p": vp[n] * P[n], "x": vp[n] * Q[n] + vx[n] * x[n] + 2 * vx[n] * P[n]}
    out, changed = _gated(final, [])
    assert changed
    assert out["p"] == final["p"]  # one chain: nothing mixes
    terms = sp.Add.make_args(out["x"])
    assert len(terms) == 2 and all(isinstance(t, given) for t in terms)
    on = {t.positions: t.args[0] for t in terms}
    assert on == {(1,): vp[n] * Q[n], (0,): vx[n] * x[n] + 2 * vx[n] * P[n]}  # one per chain


def test_an_adjoint_carries_the_cotangents_of_what_it_reads():
    """dp is reached from v_p alone, so a sum of dp and a v_x term mixes two chains."""
    final = {"p": vp[n] * P[n], "x": dp[n] * Q[n] + vx[n]}
    out, _ = _gated(final, ["x"])
    assert {t.positions for t in sp.Add.make_args(out["x"])} == {(0,), (1,)}


def test_a_returned_gradient_is_given_on_its_cotangents_unless_it_has_every_one():
    final = {"p": vp[n] * P[n], "x": vx[n] * Q[n] + vp[n] * P[n], "g": vx[n] * x[n]}
    out, _ = _gated(final, ["p", "x", "g"])
    assert out["p"] == given(vp[n] * P[n], 1)
    assert out["g"] == given(vx[n] * x[n], 0)
    assert not isinstance(out["x"], given)  # both chains: given term by term inside


def test_one_cotangent_gives_nothing():
    final = {"x": vx[n] * Q[n] + vx[n] * P[n]}
    out, changed = gated(["x"], final, {"x": "dx"}, {}, {"v_x": 0}, ["x"])
    assert not changed and out == final


def test_a_where_gives_its_branches():
    from derive.functions import where

    final = {"x": where(x[n] > 0, vx[n] * P[n], vp[n] * Q[n])}
    out, _ = _gated(final, [])
    _, a, b = out["x"].args
    assert (a, b) == (given(vx[n] * P[n], 0), given(vp[n] * Q[n], 1))
