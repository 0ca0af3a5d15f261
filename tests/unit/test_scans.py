"""The triangular-sum rule of derive/lower/scans.py (issue 25), one expression each: which
masks it reads as a running sum (pure: it lowers nothing), which it leaves to the generic
lowering, and the cumsum an op's module then holds. The numbers are tests/modules/
test_windows.py's (cumsum, cumsum_strict against torch)."""

from __future__ import annotations

import pytest
import sympy as sp

from derive import Op
from derive.emit.generate import module_source
from derive.functions import where
from derive.lower.lowerer import Lowerer
from derive.lower.scans import plan_scan

N, T = sp.symbols("N T", integer=True, positive=True)
n, s, t, u = sp.symbols("n s t u", integer=True)
x = sp.IndexedBase("x", shape=(N, T), real=True)


def _scope():
    lw = Lowerer("t", {"x", "N", "T"}, {n: N, t: T, u: T + 1}, scalars={"N", "T"})
    return lw.context, lw.context.scope([n, t])


def _sum(body):
    return sp.Sum(body, (s, 0, T - 1))


@pytest.mark.parametrize(
    ("expr", "found"),
    [
        (_sum(where(s <= t, x[n, s], 0)), (t, False, False)),  # cumsum
        (_sum(where(t <= s, 1, 0) * x[n, s]), (t, True, False)),  # its adjoint: from the end
        (_sum(where(s < t, x[n, s] ** 2, 0)), (t, False, True)),  # before t
        (_sum(where(s > t, 2, 0) * x[n, s]), (t, True, True)),  # after t
        (_sum(where(s <= t + 1, x[n, s], 0)), None),  # an affine bound: generic
        (_sum(where(s <= u, x[n, s], 0)), None),  # u runs over T + 1, s over T
        (_sum(where(s <= t, x[n, s] * t, 0)), None),  # the body reads t
        (_sum(where(s <= t, x[n, s], 1)), None),  # 1 where masked: no running sum
    ],
)
def test_scan_match_is_pure(expr: sp.Sum, found: tuple | None) -> None:
    cx, scope = _scope()
    plan = plan_scan(scope, expr)
    assert (plan is None) == (found is None)
    if plan is not None:
        assert (plan.out, plan.reverse, plan.exclusive) == found
    assert cx.statements == [] and cx.memo == {}


def test_a_cumulative_sum_and_its_adjoint_are_one_cumsum_each() -> None:
    op = Op(
        "t",
        ["x[N, T]"],
        ["out[n, t] = Sum(where(s <= t, x[n, s], 0), s)"],
        ranges={"t": "T"},
    )
    lines = [line.strip() for line in module_source(op, "out").splitlines()]
    assert "out = x.cumsum(1)" in lines
    assert "dx = grad_out.flip(1).cumsum(1).flip(1)" in lines
    assert not any("torch.arange" in line for line in lines)
