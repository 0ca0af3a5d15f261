"""A power's derivatives where its base is 0: finite wherever torch's are.

SymPy differentiates ``b**e`` (e not a number) as ``b**e (e' log b + e b'/b)``: a division by b
and a log of b, 0 * inf = NaN at b = 0 where the derivative is finite (d x**2/dx = 0 at 0).
:class:`derive.symbolic.reverse._power` takes the partials as torch's pow backward does, and
every mode reads them: the backward, the tangent map (``torch.func.jacfwd``) and the double
backward (``create_graph=True``). References are torch's own ``pow`` under autograd, or the
recurrence a moving average is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.func import jacfwd

from tests.modules.emitted import imported

CASES = Path(__file__).resolve().parents[1] / "cases"
D = torch.float64


def _module(name: str, tmp_path: Path):
    return imported(CASES / f"{name}.py", tmp_path)[0]


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5])
def test_a_power_of_a_param_is_differentiated_at_a_zero_base(p, tmp_path) -> None:
    """x**p at x = 0: torch's gradient is 0 (p = 0, p > 1), 1 (p = 1) or inf (p = 1/2); the
    tangent and the second derivative likewise (p (p - 1) x**(p - 2): 2 at p = 2)."""
    module = _module("power_of_a_param", tmp_path)
    x = torch.tensor([0.0, 1.5, -2.0 if p == int(p) else 2.0], dtype=D)

    def mine(v):
        return module.Function.apply(v, p)

    def ref(v):
        return v**p

    for f in (mine, ref):
        assert f(x).shape == (3,)
    leaf, want_leaf = x.clone().requires_grad_(), x.clone().requires_grad_()
    (g,) = torch.autograd.grad(mine(leaf).sum(), leaf, create_graph=True)
    (want_g,) = torch.autograd.grad(ref(want_leaf).sum(), want_leaf, create_graph=True)
    torch.testing.assert_close(g, want_g, equal_nan=False)
    torch.testing.assert_close(torch.diag(jacfwd(mine)(x)), torch.diag(jacfwd(ref)(x)))
    if p != 0.5:  # d/dx of x**(-1/2) at 0: inf against inf, not compared by value
        torch.testing.assert_close(_second(g, leaf), _second(want_g, want_leaf))


def _second(g: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    """d sum(g)/d leaf; zeros where g is a constant (torch's d x**0: no graph to go back)."""
    if not g.requires_grad:
        return torch.zeros_like(leaf)
    return torch.autograd.grad(g.sum(), leaf)[0]


def test_a_learned_exponent_has_a_gradient_where_the_base_is_zero(tmp_path) -> None:
    """Generalised-mean pooling after a relu: zeros are the common case, and d x**p/dp there
    is 0 (torch: 0.1202 for p at x = [0, 1, 2], p = 3), not 0 * log 0."""
    module = _module("gem_pooling", tmp_path)
    x = torch.tensor([[[0.0, 1.0, 2.0], [-1.0, 0.0, 3.0]]], dtype=D)
    p, want_p = (torch.tensor(3.0, dtype=D, requires_grad=True) for _ in range(2))
    out = module.Function.apply(x, p)
    want = (torch.relu(x) ** want_p).mean(-1) ** (1 / want_p)
    torch.testing.assert_close(out, want)
    (dp,) = torch.autograd.grad(out.sum(), p)
    (want_dp,) = torch.autograd.grad(want.sum(), want_p)
    assert torch.isfinite(dp)
    torch.testing.assert_close(dp, want_dp)
    fixed = p.detach()
    torch.testing.assert_close(
        jacfwd(lambda v: module.Function.apply(v, fixed))(x),
        jacfwd(lambda v: (torch.relu(v) ** fixed).mean(-1) ** (1 / fixed))(x),
    )


def _recurrence(x: torch.Tensor, a: torch.Tensor, *, decay: bool) -> torch.Tensor:
    """acc = (1 - a) acc + a x[t] (a moving average), or acc = gamma acc + r[t] run backwards
    (discounted returns): the definitions' sums as the loops they are."""
    out, acc = [], torch.zeros_like(x[:, 0])
    steps = range(x.shape[1]) if decay else reversed(range(x.shape[1]))
    for t in steps:
        acc = (1 - a) * acc + a * x[:, t] if decay else a * acc + x[:, t]
        out.append(acc)
    return torch.stack(out if decay else out[::-1], 1)


@pytest.mark.parametrize(
    ("name", "at", "decay"),
    [
        ("moving_average", 1.0, True),
        ("moving_average", 0.0, True),
        ("discounted_returns", 0.0, False),
    ],
)
def test_a_power_of_an_index_difference_is_differentiated_at_a_zero_base(
    name, at, decay, tmp_path
) -> None:
    """(1 - a)**(t - s) at a = 1 and gamma**(s - t) at gamma = 0: the s = t term is b**0 = 1,
    whose derivative is 0, not 0 * 0**(-1)."""
    module = _module(name, tmp_path)
    x = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]], dtype=D)
    a, want_a = (torch.tensor(at, dtype=D, requires_grad=True) for _ in range(2))
    out = module.Function.apply(x, a)
    want = _recurrence(x, want_a, decay=decay)
    torch.testing.assert_close(out, want)
    (da,) = torch.autograd.grad(out.sum(), a)
    (want_da,) = torch.autograd.grad(want.sum(), want_a)
    torch.testing.assert_close(da, want_da)
    fixed = torch.tensor(at, dtype=D)
    torch.testing.assert_close(
        jacfwd(lambda s: module.Function.apply(x, s))(fixed),
        jacfwd(lambda s: _recurrence(x, s, decay=decay))(fixed),
    )


def test_a_focal_loss_has_a_finite_second_derivative_where_it_is_sure(tmp_path) -> None:
    """(1 - pt)**gamma twice differentiated at pt = 1 (a logit of 40 in float64): torch's
    second derivative through the literal definitions is 0, not (1 - pt)**gamma / (1 - pt)**2
    = 0 / 0."""
    module = _module("focal_loss_gamma", tmp_path)
    x = torch.tensor([[40.0, 0.0, 0.0], [1.0, 2.0, 0.5]], dtype=D)
    y = torch.tensor([0, 1])

    def ref(v):
        logp = torch.log_softmax(v, 1).gather(1, y[:, None])[:, 0]
        return (-0.25 * (1 - logp.exp()) ** 2.0 * logp).mean()

    leaf, want_leaf = x.clone().requires_grad_(), x.clone().requires_grad_()
    (g,) = torch.autograd.grad(module.Function.apply(leaf, y, 2.0, 0.25), leaf, create_graph=True)
    (want_g,) = torch.autograd.grad(ref(want_leaf), want_leaf, create_graph=True)
    torch.testing.assert_close(g, want_g)
    (gg,) = torch.autograd.grad(g.pow(2).sum(), leaf)
    (want_gg,) = torch.autograd.grad(want_g.pow(2).sum(), want_leaf)
    assert torch.isfinite(gg).all(), gg
    torch.testing.assert_close(gg, want_gg)


def test_a_power_of_a_positive_function_is_masked_where_it_rounds_to_zero(tmp_path) -> None:
    """softplus(-800) is 0 in float64 though SymPy proves softplus positive: d b**y/dy there
    is torch's 0, not 0 * log 0."""
    module = _module("softplus_power", tmp_path)
    x = torch.tensor([-800.0, 0.5, -2.0], dtype=D)
    y = torch.tensor([1.5, 0.7, 2.0], dtype=D)
    mine = [t.clone().requires_grad_() for t in (x, y)]
    ref = [t.clone().requires_grad_() for t in (x, y)]
    out = module.Function.apply(*mine)
    want = torch.nn.functional.softplus(ref[0]) ** ref[1]
    torch.testing.assert_close(out, want)
    got = torch.autograd.grad(out.sum(), mine)
    expected = torch.autograd.grad(want.sum(), ref)
    for g, w in zip(got, expected, strict=True):
        assert torch.isfinite(g).all(), g
        torch.testing.assert_close(g, w)


KINKS = {
    "powers_of_kinks": lambda x: torch.relu(x) ** 1.5,
    "kinks_in_a_sum": lambda x: torch.relu(x) ** 1.5 + torch.maximum(x, torch.zeros_like(x)) ** 2.5,
}


@pytest.mark.parametrize("name", sorted(KINKS))
def test_a_power_of_a_kink_has_torchs_second_derivative_where_it_is_flat(name, tmp_path) -> None:
    """relu(x)**1.5 twice differentiated: 0 at x <= 0 (torch's threshold backward selects),
    not the step's square times relu(x)**(-1/2) = 0 * inf; beside other such terms too,
    where a fusion would take the square for a number."""
    module = _module(name, tmp_path)
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 3.0], dtype=D)
    mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    (g,) = torch.autograd.grad(module.Function.apply(mine).sum(), mine, create_graph=True)
    want = KINKS[name](ref)
    (want_g,) = torch.autograd.grad(want.sum(), ref, create_graph=True)
    torch.testing.assert_close(g, want_g)
    (gg,) = torch.autograd.grad(g.sum(), mine)
    (want_gg,) = torch.autograd.grad(want_g.sum(), ref)
    assert torch.isfinite(gg).all(), gg
    torch.testing.assert_close(gg, want_gg)
