"""Every generated backward against torch autograd through an independent reference."""

from __future__ import annotations

import pytest
import torch

from tests.op_table import OPS, OpSpec

SEEDS = range(12)  # a seeded sweep of random shapes per op


def _inputs(spec: OpSpec, seed: int, dtype=torch.float64) -> list[torch.Tensor]:
    return spec.draw(seed, dtype)[0]


def _compare(
    spec: OpSpec, inputs: list[torch.Tensor], params: dict | None = None
) -> tuple[float, float]:
    """Max abs difference of outputs and of gradients, generated vs autograd."""
    params = params or {}
    out, saved = spec.module.forward(*inputs, **params)
    grad_out = torch.randn_like(out)
    derived = spec.module.backward(grad_out, saved)
    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    ref = spec.reference(*leaves, **params)
    wanted = [t for t in leaves if t.requires_grad]
    reference = torch.autograd.grad(ref, wanted, grad_out)
    assert len(derived) == len(inputs)
    mine = [g for g, t in zip(derived, inputs, strict=True) if t.is_floating_point()]
    assert all(g is None for g, t in zip(derived, inputs, strict=True) if not t.is_floating_point())
    out_diff = float((out - ref.detach()).abs().max()) if out.numel() else 0.0
    diffs = [float((a - b).abs().max()) if a.numel() else 0.0 for a, b in zip(mine, reference)]
    for a, b in zip(mine, reference, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
    return out_diff, max(diffs, default=0.0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
def test_backward_matches_autograd_float64(spec: OpSpec, seed: int) -> None:
    out_diff, grad_diff = _compare(spec, *spec.draw(seed))
    assert out_diff <= 1e-10
    assert grad_diff <= 1e-10


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
def test_gradcheck_on_function(spec: OpSpec) -> None:
    for seed in range(3):
        inputs, params = spec.draw(seed)
        inputs = [t.requires_grad_(t.is_floating_point()) for t in inputs]
        extra = tuple(params.values())  # Function takes params positionally, after tensors
        assert torch.autograd.gradcheck(spec.module.Function.apply, (*inputs, *extra))


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
def test_gradgradcheck_on_function(spec: OpSpec) -> None:
    """The derived double backward against finite differences of the backward, at the table's
    shapes and params (fast mode: one random projection of the Jacobian)."""
    for seed in range(2):
        inputs, params = spec.draw(seed)
        inputs = [t.requires_grad_(t.is_floating_point()) for t in inputs]
        extra = tuple(params.values())
        apply = spec.module.Function.apply
        assert torch.autograd.gradgradcheck(apply, (*inputs, *extra), fast_mode=True)


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
def test_float32_agrees(spec: OpSpec) -> None:
    for seed in range(4):
        out_diff, grad_diff = _compare(spec, *spec.draw(seed, torch.float32))
        assert out_diff <= 1e-4 and grad_diff <= 1e-4


def test_batchnorm_batch_of_two() -> None:
    x = torch.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, 3.0]], dtype=torch.float64)
    gain, bias = torch.rand(3, dtype=torch.float64) + 0.5, torch.randn(3, dtype=torch.float64)
    spec = next(s for s in OPS if s.name == "batchnorm")
    out_diff, grad_diff = _compare(spec, [x, gain, bias])
    assert out_diff <= 1e-10 and grad_diff <= 1e-10


def test_cross_entropy_one_class_has_zero_gradient() -> None:
    from generated import cross_entropy

    logits = torch.randn(5, 1, dtype=torch.float64)
    loss, saved = cross_entropy.forward(logits, torch.zeros(5, dtype=torch.int64))
    dlogits, dtargets = cross_entropy.backward(torch.tensor(1.0, dtype=torch.float64), saved)
    assert float(loss) == 0.0 and dtargets is None
    assert torch.equal(dlogits, torch.zeros_like(dlogits))


@pytest.mark.parametrize("scale", [1e4, -1e4])
def test_cross_entropy_extreme_logits_stay_finite(scale: float) -> None:
    from generated import cross_entropy

    logits = torch.randn(6, 5, dtype=torch.float32) * scale
    targets = torch.randint(0, 5, (6,))
    loss, saved = cross_entropy.forward(logits, targets)
    dlogits, _ = cross_entropy.backward(torch.tensor(1.0), saved)
    assert torch.isfinite(loss) and torch.isfinite(dlogits).all()
    ref = logits.clone().requires_grad_()
    torch.nn.functional.cross_entropy(ref, targets).backward()
    assert torch.allclose(dlogits, ref.grad, atol=1e-6)


def test_embedding_accumulates_repeated_indices() -> None:
    from generated import embedding

    idx = torch.tensor([[1, 1, 1], [0, 1, 3]])
    C = torch.randn(4, 2, dtype=torch.float64)
    out, saved = embedding.forward(idx, C)
    _, dC = embedding.backward(torch.ones_like(out), saved)
    assert dC[:, 0].tolist() == [1.0, 4.0, 0.0, 1.0]


def test_function_trains_inside_torch_optim() -> None:
    from generated import linear, tanh

    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 3, generator=gen), torch.randn(32, 2, generator=gen)
    W = torch.randn(3, 2, generator=gen, requires_grad=True)
    b = torch.zeros(2, requires_grad=True)
    opt = torch.optim.SGD([W, b], lr=0.1)
    losses = []
    for _ in range(50):
        opt.zero_grad()
        loss = ((tanh.Function.apply(linear.Function.apply(x, W, b)) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_function_takes_params_positionally() -> None:
    from generated import batchnorm

    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    gain, bias = torch.ones(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    out = batchnorm.Function.apply(x, gain, bias, 0.5)
    expected, _ = batchnorm.forward(x.detach(), gain, bias, eps=0.5)
    assert torch.allclose(out, expected)
    assert torch.autograd.gradcheck(lambda t: batchnorm.Function.apply(t, gain, bias, 0.5), (x,))


def test_relu_gradient_at_exactly_zero_is_zero() -> None:
    spec = next(s for s in OPS if s.name == "relu")
    x = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)
    _, saved = spec.module.forward(x)
    (dx,) = spec.module.backward(torch.ones_like(x), saved)
    assert dx.tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
@pytest.mark.parametrize("columns", [1, 5])
def test_rows_of_extreme_values_stay_finite_and_exact(name: str, columns: int) -> None:
    spec = next(s for s in OPS if s.name == name)
    x = torch.tensor([[1e4, -1e4, 0.0, 1e4 - 1, -3.0], [-1e4] * 5], dtype=torch.float64)
    x = x[:, :columns].contiguous()
    out, saved = spec.module.forward(x)
    grad_out = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)
    (dx,) = spec.module.backward(grad_out, saved)
    leaf = x.clone().requires_grad_(True)
    ref = spec.reference(leaf)
    (want,) = torch.autograd.grad(ref, leaf, grad_out)
    assert torch.isfinite(out).all() and torch.isfinite(dx).all()
    assert torch.allclose(out, ref.detach(), rtol=1e-12, atol=1e-12)
    assert torch.allclose(dx, want, rtol=1e-12, atol=1e-12)


def test_batchnorm_of_one_row_is_refused_not_nan() -> None:
    spec = next(s for s in OPS if s.name == "batchnorm")
    x, gain, bias = _inputs(spec, 0)
    with pytest.raises(ValueError, match=r"batchnorm: N - 1 is 0, but it must be positive"):
        spec.module.forward(x[:1], gain, bias)


def test_cross_entropy_of_no_rows_names_the_op() -> None:
    spec = next(s for s in OPS if s.name == "cross_entropy")
    logits, targets = _inputs(spec, 0)
    with pytest.raises(ValueError, match=r"cross_entropy: N is 0, but it must be positive"):
        spec.module.forward(logits[:0], targets[:0])


@pytest.mark.parametrize("name", ["tanh", "batchnorm", "embedding", "cross_entropy"])
def test_backward_refuses_a_grad_out_that_does_not_match(name: str) -> None:
    spec = next(s for s in OPS if s.name == name)
    out, saved = spec.module.forward(*_inputs(spec, 3))
    wrong_shape = torch.ones(out.shape + (2,), dtype=out.dtype)
    with pytest.raises(ValueError, match=rf"{name}: grad_out is .*, but forward returned"):
        spec.module.backward(wrong_shape, saved)
    with pytest.raises(ValueError, match=rf"{name}: grad_out is .*float32"):
        spec.module.backward(torch.ones_like(out, dtype=torch.float32), saved)
