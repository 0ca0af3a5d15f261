"""Generated ops under autograd's batched gradients, as PyTorch's own ops work there.

``torch.autograd.functional.jacobian`` and ``hessian`` with ``vectorize=True``,
``torch.autograd.grad(..., is_grads_batched=True)`` and ``gradcheck``'s
``check_batched_grad`` run a node's backward (and jvp) under torch's *legacy* vmap, not
torch.func's: it has no batching rule for ``einsum``, ``flatten`` or ``unflatten``, which the
generated code calls for contractions and matrix products, so a SwiGLU's jacobian, a
layernorm's hessian and attention's gradcheck raised there (found by probing). Each result
is held to the same function evaluated unbatched through the definitions' text
(:mod:`derive.verify.oracle`).
"""

from __future__ import annotations

import glob
import importlib
import runpy

import pytest
import torch
from torch.autograd.functional import hessian, jacobian

from derive import Op
from derive.emit.generate import module_source
from derive.language import parse
from derive.verify.check import defined_inputs, load_module
from tests.modules.emitted import as_functions

CATALOGUE = sorted(glob.glob("ops/*.py"))
TOL = 1e-9

# ops users write whose first or second order contracts several axes (einsum) or multiplies
# grouped axes (flatten, unflatten), beside the catalogue's layernorm and attention
SWIGLU = Op(
    name="swiglu",
    doc="SwiGLU.",
    inputs=["x[N, D]", "W1[D, H]", "W2[D, H]"],
    definitions=[
        "a[n, h] = Sum(x[n, d] * W1[d, h], d)",
        "b[n, h] = Sum(x[n, d] * W2[d, h], d)",
        "out[n, h] = a[n, h] * sigmoid(a[n, h]) * b[n, h]",
    ],
)
BILINEAR = Op(
    name="bilinear",
    doc="F.bilinear.",
    inputs=["x1[N, I]", "x2[N, J]", "W[O, I, J]", "b[O]"],
    definitions=["out[n, o] = Sum(x1[n, i] * W[o, i, j] * x2[n, j], i, j) + b[o]"],
)
GROUPNORM = Op(
    name="groupnorm",
    doc="Group normalisation.",
    inputs=["x[N, C, L]", "gain[C]", "bias[C]"],
    params={"groups": 2, "eps": 1e-5},
    sizes={"G": "groups", "CG": "C / groups"},
    definitions=[
        "xg = view(x, N, G, CG, L)",
        "gg = view(gain, G, CG)",
        "bg = view(bias, G, CG)",
        "mean[n, g] = Sum(xg[n, g, c, l], c, l) / (CG * L)",
        "var[n, g] = Sum((xg[n, g, c, l] - mean[n, g])**2, c, l) / (CG * L)",
        "outg[n, g, c, l] = (xg[n, g, c, l] - mean[n, g]) * (var[n, g] + eps)**(-1/2) * gg[g, c]"
        " + bg[g, c]",
        "out = view(outg, N, C, L)",
    ],
)
USER = {op.name: op for op in (SWIGLU, BILINEAR, GROUPNORM)}


def _catalogue(path: str):
    op = runpy.run_path(path)["OP"]
    return op, importlib.import_module(f"generated.{op.name}")


def _user(name: str, folder):
    op = USER[name]
    path = folder / f"{name}.py"
    path.write_text(module_source(op, "out"))
    return op, load_module(path)


def _flat(result) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in torch.utils._pytree.tree_leaves(result)])


def _close(mine, want):
    mine, want = _flat(mine), _flat(want)
    assert mine.shape == want.shape
    assert float((mine - want).abs().max()) <= TOL * max(1.0, float(want.abs().max()))


def _vectorized_jacobians_and_hessian_equal_the_definitions(op, module):
    mine, text, xs = as_functions(op, module, defined_inputs(parse(op), 0)[0])
    w = torch.randn(
        mine(*xs).shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    for strategy in ("reverse-mode", "forward-mode"):
        got = jacobian(mine, xs, vectorize=True, strategy=strategy)
        _close(got, jacobian(text, xs))
    scalar = [lambda *a, f=f: (f(*a) * w).sum() for f in (mine, text)]
    want = hessian(scalar[1], xs)
    for outer in ("reverse-mode", "forward-mode"):
        got = hessian(scalar[0], xs, vectorize=True, outer_jacobian_strategy=outer)
        _close(got, want)


@pytest.mark.parametrize("path", CATALOGUE)
def test_catalogue_under_vectorized_jacobian_and_hessian(path):
    _vectorized_jacobians_and_hessian_equal_the_definitions(*_catalogue(path))


@pytest.mark.parametrize("name", sorted(USER))
def test_user_ops_under_vectorized_jacobian_and_hessian(name, tmp_path):
    _vectorized_jacobians_and_hessian_equal_the_definitions(*_user(name, tmp_path))


@pytest.mark.parametrize("name", ["layernorm", "causal_self_attention"])
def test_gradcheck_and_gradgradcheck_with_batched_grads(name):
    op, module = _catalogue(f"ops/{name}.py")
    inputs, _ = defined_inputs(parse(op), 0)
    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    f = module.Function.apply
    assert torch.autograd.gradcheck(f, leaves, check_batched_grad=True)
    assert torch.autograd.gradgradcheck(f, leaves, check_batched_grad=True)


def test_is_grads_batched_gives_each_row_of_the_jacobian(tmp_path):
    """autograd.grad with a batch of cotangents: each row the gradient one cotangent gives."""
    op, module = _user("swiglu", tmp_path)
    mine, _, xs = as_functions(op, module, defined_inputs(parse(op), 0)[0])
    leaves = [x.clone().requires_grad_() for x in xs]
    out = mine(*leaves)
    v = torch.randn((3, *out.shape), dtype=out.dtype, generator=torch.Generator().manual_seed(2))
    batched = torch.autograd.grad(out, leaves, v, retain_graph=True, is_grads_batched=True)
    for k in range(3):
        rows = torch.autograd.grad(out, leaves, v[k], retain_graph=True)
        for got, want in zip(batched, rows, strict=True):
            _close(got[k], want)


SPECS = [
    ("ab,bc->ac", [(3, 4), (4, 5)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("b,bc,ba->a", [(4,), (4, 3), (4, 2)]),  # layernorm's double backward
    ("nhtd,nhsd->nhts", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ii->i", [(4, 4)]),
    ("iij,j->i", [(3, 3, 2), (2,)]),
    ("ab->", [(3, 4)]),
    ("ab,ab->", [(3, 4), (3, 4)]),
    ("ab,a->ba", [(3, 4), (1,)]),  # a size-1 axis broadcast
    ("abc,ab,c->", [(0, 2, 3), (0, 2), (3,)]),  # an empty axis
    ("a,b,c->cab", [(2,), (3,), (4,)]),
]


@pytest.mark.parametrize("spec, shapes", SPECS)
def test_einsum_by_bmm_is_torch_einsum(spec, shapes, tmp_path):
    """The rerouted einsum, run unbatched, against torch.einsum: diagonals, broadcasts, an
    empty axis, a scalar result, three operands."""
    _, module = _catalogue("ops/layernorm.py")
    gen = torch.Generator().manual_seed(3)
    operands = [torch.randn(s, dtype=torch.float64, generator=gen) for s in shapes]
    got = module._einsum_by_bmm(spec, *operands)
    want = torch.einsum(spec, *operands)
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_flatten_and_unflatten_by_reshape_keep_empty_axes():
    _, module = _catalogue("ops/layernorm.py")
    x = torch.zeros(0, 3, 4)
    assert module._flatten(x, 1).shape == x.flatten(1).shape
    assert module._flatten(x, 0, 1).shape == x.flatten(0, 1).shape
    assert module._unflatten(x, -1, (2, -1)).shape == x.unflatten(-1, (2, -1)).shape


@pytest.mark.parametrize("path", CATALOGUE)
def test_each_module_calling_einsum_or_flatten_reroutes_them(path):
    """Which modules get the rerouting is read off the IR; the module's text holds it to that:
    no einsum, flatten or unflatten call without ``_legacy_vmap`` beside it."""
    text = open(f"generated/{runpy.run_path(path)['OP'].name}.py").read()
    calls = ("torch.einsum(", ".flatten(", ".unflatten(")
    if any(c in text for c in calls):
        assert "def _legacy_vmap(" in text


@pytest.mark.parametrize("path", CATALOGUE)
def test_a_graph_through_batched_gradients_is_refused_not_dropped(path):
    """create_graph=True under the legacy vmap: torch hands an autograd.Function run inside a
    backward back without its graph, so the generated gradients came back as constants and a
    penalty on them added nothing to the inputs' gradients (found by probing: tanh's
    ``d/dx [sum(g**2) + sum(x)]`` was all ones). torch.func's transforms keep the graph
    (test_torch_func.py); here it is refused in one line that names the op."""
    op, module = _catalogue(path)
    mine, _, xs = as_functions(op, module, defined_inputs(parse(op), 0)[0])
    leaves = [x.clone().requires_grad_() for x in xs]
    out = mine(*leaves)
    v = torch.randn((2, *out.shape), dtype=out.dtype, generator=torch.Generator().manual_seed(4))
    with pytest.raises(RuntimeError) as info:
        torch.autograd.grad(out, leaves, v, is_grads_batched=True, create_graph=True)
    message = str(info.value)
    assert message.startswith(f"{op.name}: ") and "\n" not in message, message
    assert "is_grads_batched" in message and "torch.func" in message
    scalar = lambda *a: (mine(*a) * v[0]).sum()  # noqa: E731
    with pytest.raises(RuntimeError) as info:
        hessian(scalar, tuple(leaves), create_graph=True, vectorize=True)
    assert str(info.value).startswith(f"{op.name}: "), info.value
