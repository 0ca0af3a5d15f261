"""A param's arithmetic takes torch's inf and nan where python would raise.

Params are python numbers; ``1 / beta`` at beta = 0, ``math.log(0)``, ``math.exp(800)`` raise
in python where a tensor's arithmetic carries inf, and a where() then drops it: smooth L1 at
beta = 0 is the L1 loss (torch's ``smooth_l1_loss(beta=0)``). ``(-8.) ** (1/3)`` is complex in
python, nan in torch. derive/ir/scalars.py routes each such computation through a module helper;
the references here are torch's own functions, or the branch the guard selects written out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.func import jacfwd

from tests.modules.emitted import imported

CASES = Path(__file__).resolve().parents[1] / "cases"
D = torch.float64


def _module(name: str, tmp_path: Path):
    return imported(CASES / f"{name}.py", tmp_path)[0]


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_smooth_l1_is_torchs_at_every_threshold(beta, tmp_path) -> None:
    """beta = 0: the L1 loss, where the module raised ZeroDivisionError (d**2 / (2 beta) in the
    branch the where() drops); first and second derivatives and the tangent as torch's."""
    module = _module("smooth_l1", tmp_path)
    x = torch.tensor([[0.0, 1.5, -2.0, 0.3], [0.9, 1.2, 1.0, -0.1]], dtype=D)
    t = torch.ones_like(x)
    mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = module.Function.apply(mine, t, beta)
    want = F.smooth_l1_loss(ref, t, beta=beta)
    torch.testing.assert_close(out, want)
    (g,) = torch.autograd.grad(out, mine, create_graph=True)
    (want_g,) = torch.autograd.grad(want, ref, create_graph=True)
    torch.testing.assert_close(g, want_g)
    torch.testing.assert_close(
        jacfwd(lambda v: module.Function.apply(v, t, beta))(x),
        jacfwd(lambda v: F.smooth_l1_loss(v, t, beta=beta))(x),
    )
    (gg,) = torch.autograd.grad((g * g).sum(), mine)
    want_gg = torch.autograd.grad((want_g * want_g).sum(), ref)[0] if want_g.requires_grad else 0
    torch.testing.assert_close(gg, torch.zeros_like(gg) + want_gg)


def _guarded(x: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """The case's definitions in torch, params as 0-d tensors (torch's inf and nan)."""
    a_, b_ = torch.tensor(alpha, dtype=D), torch.tensor(beta, dtype=D)
    a = torch.where(a_ > 0, x * torch.log(a_) + x**2 / a_, x)
    cube = torch.where(x > 0, torch.pow(b_, 1 / 3), torch.ones_like(x))
    return a * cube + torch.where(x > 100, torch.exp(a_ * 400), torch.zeros_like(x))


@pytest.mark.parametrize(("alpha", "beta"), [(0.0, 8.0), (-1.0, 8.0), (2.0, 8.0), (0.5, -8.0)])
def test_a_guarded_function_of_a_param_takes_torchs_value(alpha, beta, tmp_path) -> None:
    """log(0), 1/0, exp(800) in a branch a where() drops: the forward and gradient of the
    branch it keeps (at alpha <= 0, out = x * cube(beta) and dx = cube(beta), written out:
    torch's own autograd through the where is 0 * inf = nan there); beta < 0: nan where the
    cube root is read (x > 0), as torch.pow's, the rest finite."""
    module = _module("guarded_param_functions", tmp_path)
    x = torch.tensor([-1.5, 0.5, 2.0, -0.25], dtype=D)
    mine = x.clone().requires_grad_()
    out = module.Function.apply(mine, alpha, beta)
    torch.testing.assert_close(out, _guarded(x, alpha, beta), equal_nan=True)
    (dx,) = torch.autograd.grad(out.sum(), mine)
    tangent = torch.diag(jacfwd(lambda v: module.Function.apply(v, alpha, beta))(x))
    if alpha <= 0:
        cube = torch.where(x > 0, torch.tensor(beta, dtype=D) ** (1 / 3), 1.0)
        torch.testing.assert_close(dx, cube)
        torch.testing.assert_close(tangent, cube)
        return
    ref = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(_guarded(ref, alpha, beta).sum(), ref)
    torch.testing.assert_close(dx, want, equal_nan=True)
    torch.testing.assert_close(tangent, want, equal_nan=True)
    assert torch.isfinite(dx[x <= 0]).all(), dx


@pytest.mark.parametrize("alpha", [0.0, -0.0, 2.0, -3.0])
def test_the_sign_of_a_param_is_torchs(alpha, tmp_path) -> None:
    """0 at alpha = 0 (and -0.0), as torch.sign: python's copysign said 1 (and -1)."""
    module = _module("sign_of_a_param", tmp_path)
    x = torch.tensor([0.5, -1.0, 2.0], dtype=D)
    mine = x.clone().requires_grad_()
    out = module.Function.apply(mine, alpha)
    sign = torch.sign(torch.tensor(alpha, dtype=D))
    torch.testing.assert_close(out, x * sign)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), mine)[0], sign.expand(3))


def test_a_constant_past_floats_range_is_inf(tmp_path) -> None:
    """``exp(1000)`` and ``10**400`` are inf, as torch's exp is: the module printed a bare
    ``inf`` (a NameError when called) and an int no tensor takes (OverflowError)."""
    from derive import Op
    from derive.emit.generate import module_source
    from derive.verify.check import load_module

    x = torch.tensor([0.5, -1.0], dtype=D)
    for k, factor in enumerate(["exp(1000)", "10**400", "sinh(800)"]):
        op = Op(name=f"big{k}", inputs=["x[N]"], definitions=[f"out[n] = x[n] * {factor}"])
        path = tmp_path / f"big{k}.py"
        path.write_text(module_source(op, "out"))
        out = load_module(path).Function.apply(x)
        torch.testing.assert_close(out, x * torch.tensor(torch.inf, dtype=D))


@pytest.mark.parametrize("alpha", [2.0, 0.5, -1.0, 0.0])
def test_the_extremes_of_params_are_torchs(alpha, tmp_path) -> None:
    """maximum/minimum of params as torch.maximum/minimum: nan where log(alpha) is (python's
    max and min kept beta), -inf taken as a number at alpha = 0."""
    module = _module("extremes_of_params", tmp_path)
    x = torch.tensor([0.5, -1.0, 2.0], dtype=D)
    beta = 0.5
    mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = module.Function.apply(mine, alpha=alpha, beta=beta)
    b, a = torch.tensor(beta, dtype=D), torch.tensor(alpha, dtype=D)
    want = ref * torch.maximum(b, torch.log(a)) + torch.minimum(ref, b * a) * torch.minimum(
        b, torch.log(a)
    )
    torch.testing.assert_close(out, want, equal_nan=True)
    (dx,) = torch.autograd.grad(out.sum(), mine)
    (want_dx,) = torch.autograd.grad(want.sum(), ref)
    torch.testing.assert_close(dx, want_dx, equal_nan=True)


def test_functions_of_sums_read_their_whole_argument(tmp_path) -> None:
    """sigmoid(a + b) of params computed 0.5 * a + b inside its tanh; a softplus of x - y
    read -x - y: a slot of a function's code form that is an operand is parenthesised."""
    module = _module("functions_of_sums", tmp_path)
    x, y = torch.tensor([0.5, -1.0, 2.0], dtype=D), torch.tensor([1.5, 0.25, -3.0], dtype=D)
    a, b = torch.tensor(1.0, dtype=D), torch.tensor(2.0, dtype=D)
    F = torch.nn.functional
    want = x * torch.sigmoid(a + b) + x * F.softplus(a - b) + F.softplus(x - y)
    want = want + torch.sigmoid(x + y)
    torch.testing.assert_close(module.Function.apply(x, y, a=1.0, b=2.0), want)
