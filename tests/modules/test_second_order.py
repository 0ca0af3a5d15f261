"""Second derivatives through generated ops are derived, and equal the definitions' own.

Autograd differentiating a generated backward's torch lines treats its saved intermediates as
constants (layernorm's double backward was off by 4.5, attention's by 24, without a word). The
module's ``_Backward`` node runs the derived second order instead. Each op here is held to the
text oracle (:mod:`derive.verify.oracle`, the definitions' strings evaluated by torch, so
autograd's own double backward through them is the reference) and to ``gradgradcheck``.
The fuzz regressions get the same comparison through ``fuzz.check`` (tests/modules/test_fuzz.py).
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import math
import runpy

import pytest
import torch
import torch.nn.functional as F

import derive.emit.double as double
from derive import Op
from derive.emit.generate import module_program
from derive.errors import CheckFailed, DerivationError
from derive.language import parse
from derive.verify.check import second_order_report
from fuzz.check import load_module
from tests.modules.emitted import imported

CATALOGUE = sorted(glob.glob("ops/*.py"))
CASES = sorted(glob.glob("tests/cases/*.py"))


def _generated(path: str):
    return importlib.import_module(f"generated.{runpy.run_path(path)['OP'].name}")


def _emitted(op: Op, folder):
    """A fresh derivation (for a test that changes the derivation itself)."""
    return load_module(module_program(op, folder), op.name, folder)


def _checked(module, op: Op, seed: int) -> None:
    """derive check's second-order comparison: against autograd's double backward through the
    text oracle (1e-8 relative), then gradgradcheck in fast mode (one random projection: the
    full Jacobian of attention's takes minutes)."""
    report = second_order_report(module, parse(op), seed)
    assert "gradgradcheck passed" in report, report


@pytest.mark.parametrize("path", CATALOGUE)
def test_catalogue_double_backward_equals_the_definitions(path):
    module, op = _generated(path), runpy.run_path(path)["OP"]
    assert module._double_backward  # derived, not refused
    for seed in range(2):
        _checked(module, op, seed)


@pytest.mark.parametrize("path", CASES)
def test_case_double_backward_equals_the_definitions(path, tmp_path):
    module, op = imported(path, tmp_path)
    _checked(module, op, 0)


def test_a_wrong_double_backward_is_caught(tmp_path):
    """The comparison can fail: the derived second order scaled by 1.01 is refused."""
    module, op = imported("ops/layernorm.py", tmp_path)
    derived = module._double_backward
    module._double_backward = lambda *args: tuple(
        None if t is None else 1.01 * t for t in derived(*args)
    )
    with pytest.raises(CheckFailed, match="the second derivative d2/dx differs"):
        _checked(module, op, 0)


def test_an_underived_second_order_raises_one_line(tmp_path, monkeypatch):
    def refuse(d):
        raise DerivationError(d.graph.op.name, "no rule for this construct (a test)")

    monkeypatch.setattr(double, "second_order_graph", refuse)
    op = runpy.run_path("ops/tanh.py")["OP"]
    module = _emitted(op, tmp_path)
    assert "Double backward: not derived (no rule for this construct" in module.__doc__
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(module.Function.apply(x).sum(), x)  # first order unaffected
    assert torch.allclose(g, 1 - torch.tanh(x) ** 2)
    (g,) = torch.autograd.grad(module.Function.apply(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="^tanh: the second derivative was not derived"):
        g.sum().backward()


def test_a_param_named_as_a_second_order_gradient_is_refused_there(tmp_path):
    """A param ``dout`` beside the output ``out``: the first backward names out's gradient
    grad_out, the double backward, where out is an intermediate, dout, which was assigned
    over the param, and d2/dw2 came out 0 (found by probing). The second order is refused in
    the module's words; the first stands."""
    op = Op(
        name="named",
        inputs=["x[N]", "w[N]"],
        params={"dout": 3.0},
        definitions=["h[n] = sin(x[n]) * w[n]", "out[n] = h[n] * dout * w[n]"],
    )
    module = _emitted(op, tmp_path)
    assert "param 'dout' has the name of the double backward's gradient of 'out'" in (
        module.__doc__
    )
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    x = torch.randn(3, dtype=torch.float64)
    (g,) = torch.autograd.grad(module.Function.apply(x, w).sum(), w, create_graph=True)
    torch.testing.assert_close(g, 2 * 3.0 * torch.sin(x) * w)
    with pytest.raises(RuntimeError, match="^named: the second derivative was not derived"):
        g.sum().backward()


def test_third_order_is_refused_not_computed_on_constants():
    from generated import tanh

    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(tanh.Function.apply(x).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x, create_graph=True)
    assert torch.allclose(h, -2 * torch.tanh(x) * (1 - torch.tanh(x) ** 2))
    with pytest.raises(RuntimeError, match="^tanh: third derivatives are not derived"):
        torch.autograd.grad((h + x**3).sum(), x)  # never 6x alone, as constants would give


def test_a_gradient_penalty_through_layernorm():
    """README's example: the gradient of a penalty on the input gradient, against torch's."""
    from generated import layernorm

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    w, b = torch.randn(6, dtype=torch.float64, generator=gen), torch.zeros(6, dtype=torch.float64)

    def penalty(f):
        (gx,) = torch.autograd.grad((f(x) ** 2).sum(), x, create_graph=True)
        return torch.autograd.grad(gx.pow(2).sum(), x)[0]

    mine = penalty(lambda t: layernorm.Function.apply(t, w, b))
    want = penalty(lambda t: torch.nn.functional.layer_norm(t, (6,), w, b))
    assert torch.allclose(mine, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["gelu_tanh", "max_pool2d"])
def test_the_backward_node_holds_no_saved_tensor_past_saved_tensors_hooks(name):
    """Under ``create_graph=True`` the generated backward is a node of its own, handed the
    forward's saved tensors (gelu_tanh's tanh). Its jvp reads them, at once or never, and the
    second order only max_pool2d's argmax: kept otherwise, they bypassed saved_tensors_hooks
    (save_on_cpu's copy) and lived as long as the gradient's graph. Each tensor the hooks
    unpack is a fresh copy here; after the gradient only the argmax may be alive, and the
    penalty still equals torch's."""
    import gc
    import weakref

    module = importlib.import_module(f"generated.{name}")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    if name == "gelu_tanh":
        mine = lambda t: module.Function.apply(t)  # noqa: E731
        torch_op = lambda t: F.gelu(t, approximate="tanh")  # noqa: E731
    else:
        mine = lambda t: module.Function.apply(t, 2, 2)  # noqa: E731
        torch_op = lambda t: F.max_pool2d(t, 2, 2)  # noqa: E731
    unpacked = []

    def unpack(t):
        t = t.clone()
        unpacked.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), unpack):
        y = mine(x)
        (gx,) = torch.autograd.grad((y**2).sum(), x, create_graph=True)
    gc.collect()
    alive = [r() for r in unpacked if r() is not None]
    assert all(not t.is_floating_point() for t in alive), [(t.dtype, t.shape) for t in alive]
    (penalty,) = torch.autograd.grad(gx.pow(2).sum(), x)
    (gt,) = torch.autograd.grad((torch_op(x) ** 2).sum(), x, create_graph=True)
    (want,) = torch.autograd.grad(gt.pow(2).sum(), x)
    assert torch.allclose(penalty, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("learned", [False, True])
def test_a_gradient_penalty_drops_the_chain_of_a_gradient_no_one_reads(learned, tmp_path):
    """GeM pooling, ``(mean relu(x)**p)**(1/p)``, over a row a relu zeroed: dp is NaN there (as
    torch's is). A gradient penalty on x alone gives p's first-order gradient no cotangent
    (None: p is fixed, or its gradient is no part of the penalty); the double backward read
    it as zeros, and 0 times the NaN partials of p's chain made the penalty's Hessian in x NaN
    on that row, where torch's is 0 (derive.symbolic.seeds). The same through torch.func."""
    module = imported(next(c for c in CASES if c.endswith("gem_pooling.py")), tmp_path)[0]
    x0 = torch.tensor([[[0.0, 1.0, 2.0], [-1.0, -2.0, -3.0]]], dtype=torch.float64)
    p = torch.tensor(3.0, dtype=torch.float64, requires_grad=learned)

    def penalty(f):
        x = x0.clone().requires_grad_()
        (gx,) = torch.autograd.grad(f(x, p).sum(), x, create_graph=True)
        return torch.autograd.grad((gx**2).sum(), x)[0]

    want = penalty(lambda x, q: (torch.relu(x) ** q).mean(-1) ** (1 / q))
    assert torch.isfinite(want).all() and (want[0, 1] == 0).all()
    torch.testing.assert_close(penalty(module.Function.apply), want, rtol=0, atol=1e-12)
    if not learned:
        fixed = p.detach()

        def gem(x):
            return module.Function.apply(x, fixed).sum()

        hessian_term = torch.func.grad(lambda x: (torch.func.grad(gem)(x) ** 2).sum())(x0)
        torch.testing.assert_close(hessian_term, want, rtol=0, atol=1e-12)


def _batchnorm_torch(x, gain, bias):
    """ops/batchnorm.py in torch ops: the batch's mean and its n-1 variance."""
    return gain * (x - x.mean(0)) / torch.sqrt(x.var(0, correction=1) + 1e-5) + bias


@pytest.mark.parametrize(
    "name, shapes, torch_op",
    [
        ("linear", [(5, 4), (4, 3), (3,)], lambda x, w, b: x @ w + b),
        ("layernorm", [(5, 4), (4,), (4,)], lambda x, w, b: F.layer_norm(x, (4,), w, b)),
        ("batchnorm", [(5, 4), (4,), (4,)], _batchnorm_torch),
    ],
)
def test_a_gradient_penalty_leaves_unreached_params_alone(name, shapes, torch_op):
    """A penalty on the input gradient of a loss linear in the output never depends on the
    bias: autograd leaves its ``.grad`` None, and an optimizer skips it (AdamW neither decays
    it nor moves it by its moments). The derived double backward's gradient there is 0, and
    the generated op hands autograd None for it, not a tensor of zeros (it did: found by
    probing). Every other param gets the same gradient as through torch's ops."""
    module = importlib.import_module(f"generated.{name}")
    gen = torch.Generator().manual_seed(0)
    values = [torch.randn(s, dtype=torch.float64, generator=gen) for s in shapes]
    c = torch.randn(shapes[0][0], shapes[1][-1], dtype=torch.float64, generator=gen)

    def grads(f):
        x, *params = (v.clone().requires_grad_(True) for v in values)
        (gx,) = torch.autograd.grad((f(x, *params) * c).sum(), x, create_graph=True)
        gx.pow(2).sum().backward()
        return [p.grad for p in params]

    mine, want = grads(module.Function.apply), grads(torch_op)
    assert [g is None for g in mine] == [g is None for g in want] == [False, True]
    assert torch.allclose(mine[0], want[0], rtol=1e-10, atol=1e-12)


def _int(shape: tuple) -> bool:
    """``(shape, high)``: an int64 input, not a float one of that shape."""
    return len(shape) == 2 and isinstance(shape[0], tuple)


def _widest_in_double_backward(module, shapes: list) -> tuple:
    """The most entries of a tensor the double backward makes (reverse over reverse of
    ``(out * out).sum()`` at inputs of ``shapes``; ``(shape, high)``: int64 in [0, high)),
    with its shape and the aten call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    gen = torch.Generator().manual_seed(0)
    args = [
        (
            torch.randint(0, s[1], s[0], generator=gen)
            if len(s) == 2 and isinstance(s[0], tuple)
            else torch.randn(s, generator=gen, dtype=torch.float64, requires_grad=True)
        )
        for s in shapes
    ]
    floats = [a for a in args if a.is_floating_point()]
    out = module.Function.apply(*args)
    grads = torch.autograd.grad((out * out).sum(), floats, create_graph=True)
    widest = []

    class Widest(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if isinstance(result, torch.Tensor):
                widest.append((result.numel(), tuple(result.shape), str(func)))
            return result

    with Widest():
        torch.autograd.grad(sum(g.sum() for g in grads), floats)
    return max(widest)


@pytest.mark.parametrize(
    ("path", "shapes"),
    [
        # B8 T16 C64, four heads (the default n_head): the largest input is Wqkv, 12,288
        ("ops/causal_self_attention.py", [(8, 16, 64), (64, 192), (192,), (64, 64), (64,)]),
        # N64 C128: the largest input is x, 8,192
        ("ops/layernorm.py", [(64, 128), (128,), (128,)]),
        # N16 M16 and a 0-d gain: x, 256 entries
        ("tests/cases/scalar_reads.py", [(16, 16), ()]),
        # N8 T64: x and y, 512 entries each
        ("tests/cases/shift.py", [(8, 64), (8, 64)]),
        # N16 C32 logits and N labels: x, 512 entries
        ("tests/cases/focal_loss_by_hand.py", [(16, 32), ((16,), 32)]),
        # a stride-2 window read beside a gather: N = 60, G = 4, J = 20, I = 29; z, 3,600
        (
            "tests/regressions/memory_s15070.py",
            [(60, 4), (60, 20, 1), (60, 20, 3), ((29,), 4)],
        ),
        # two gathers and a stride into one tensor: B = 12; Wq, 1,728
        ("tests/regressions/memory_s15002.py", [(12, 12, 12), ((12, 12), 12)]),
        # a gathered, strided read over a normalising sum: F = 4, G = 10; gain, 160
        ("tests/regressions/memory_s4022.py", [(4, 10, 4), ((10, 4), 4)]),
    ],
)
def test_a_double_backward_makes_no_temporary_much_wider_than_its_inputs(path, shapes, tmp_path):
    """Attention: the first backward's nested contractions are definitions of their own in
    the second order (``second_order._Builder._named``); read through one definition, the
    second-order adjoint of probs through dx's nest was a product over all its indices, a
    (32, 1024, 256) temporary here (8.4M entries) and an HVP ~175x autograd's; then dk's mask
    went onto dscores before its matmul with q, not into a (B, H, T, T, D) product (131,072).
    Layernorm: dgain's sum over c1 held ``delta(c, c1) g + ..`` whole, an identity matrix in a
    (N, C, C) product (1M entries here, 17 GB in float32 at (4096, 1024)); the delta's terms
    are summed apart and solved now (``simplify._delta_terms_apart``). A standardisation by
    two 0-d statistics (scalar_reads): dx and dgrad_y summed a product of sums over (n, m,
    n1, m1) whole, (N, M, N, M) (65,536 entries here); the lowering's width split now takes
    sums of polynomials in reads and factors free of the summed indices. A shift x[n, t - 1]:
    its second order summed a delta of a clamped index, (N, T, T) (32,768 entries here); the
    clamp is dropped under the where() that guards it (``simplify._unclamped_under_guard``)
    and the delta solved. A focal loss by hand: a sum of terms that each hold a delta,
    (N, C, C) (16,384 entries here); each term is summed apart and solved. A strided window
    read beside a gather (fuzz --windows 15070): the double backward's delta over n1 sat two
    sums deep, an (N, G, J, F, N) product (864,000 entries here, 43.8 GB at the fuzzer's N =
    324); solved through the nested sums now (``inversion.delta_through_sum``), and the deltas
    of a stride and a gather together are one scatter (``assign.solved_scatter``), where their
    masks were (N, I, V, J, F). Two gathers and a stride (fuzz 15002): the backward's deltas
    against data were masks over (B, B, B, B) (20,736 entries here), the second order's delta
    one sum deep unsolved; one scatter and a gather now. A gathered, strided read over a
    normalising sum (fuzz --affine 4022): its second order summed deltas under a sum inside
    a difference whole, masks over seven axes (F^5 G^2); summed apart and scattered now."""
    module = _generated(path) if path.startswith("ops/") else imported(path, tmp_path)[0]
    found = _widest_in_double_backward(module, shapes)
    largest = max(math.prod(s) for s in shapes if not _int(s))
    assert found[0] <= 4 * largest, found
