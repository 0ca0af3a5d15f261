"""The dtype policy of generated ops (derive/emit/precision.py), as torch's own ops have one.

Under ``torch.autocast`` a contraction (linear) runs in the autocast dtype, an op with any
other reduction (layernorm, softmax, the losses, attention) in float32, one without reductions
(tanh, embedding) in its inputs' dtype; outside autocast, mixed float dtypes are promoted to the
common one. Each is compared with the same computation in torch ops with that policy's casts.
"""

from __future__ import annotations

import glob
import importlib
import runpy

import pytest
import torch
import torch.nn.functional as F

from derive import Op
from derive.emit.generate import module_source
from derive.emit.precision import autocast_policy
from derive.language import parse

POLICY = {
    "linear": "lower",
    "layernorm": "float32",
    "batchnorm": "float32",
    "softmax": "float32",
    "log_softmax": "float32",
    "logsumexp": "float32",
    "cross_entropy": "float32",
    "sequence_cross_entropy": "float32",
    "causal_self_attention": "float32",
    "exercise": "float32",
    "tanh": "input",
    "relu": "input",
    "sigmoid": "input",
    "gelu": "input",
    "gelu_tanh": "input",
    "embedding": "input",
    "conv1d": "lower",  # torch's lists: conv in the low precision, cumsum in float32
    "conv2d": "lower",
    "causal_conv1d": "lower",
    "cumsum": "float32",
    "max_pool2d": "float32",  # a Max and a mean keep range (torch's pools run in the input's)
    "avg_pool2d": "float32",
}


@pytest.mark.parametrize("path", sorted(glob.glob("ops/*.py")))
def test_the_policy_is_derived_from_the_reductions(path):
    op = runpy.run_path(path)["OP"]
    assert autocast_policy(parse(op)) == POLICY[op.name]
    assert importlib.import_module(f"generated.{op.name}").AUTOCAST == POLICY[op.name]


@pytest.mark.parametrize(
    ("definition", "policy"),
    [
        ("out[n, c] = x[n, c] / sqrt(Sum(x[n, k]**2, k) / C + 1e-6)", "float32"),  # RMSNorm
        ("out[m] = Sum((x[m, k] - y[m, k])**2, k)", "float32"),  # a squared error
        ("out[n, m] = Sum(x[n, k] * y[m, k], k)", "lower"),  # a Gram matrix: a matmul
        ("out[n, m] = Sum(x[n, k]**2 * y[m, k], k)", "lower"),  # a matmul of x**2
        ("out = Sum(x[m, k] * y[m, k], m, k)", "float32"),  # a weighted sum to one number
    ],
)
def test_a_sum_of_squares_is_a_norm_not_a_contraction(definition, policy):
    """torch's autocast runs norm, mse_loss and cosine_similarity in float32: a square of one
    read counts as one operand (found by probing: RMSNorm ran in bfloat16)."""
    op = Op(name="norms", inputs=["x[M, C]", "y[M, C]"], definitions=[definition])
    assert autocast_policy(parse(op)) == policy


def test_a_weighted_loss_is_float32_though_its_calls_are_lifted():
    """The policy reads the op as written: the derivation lifts softplus(x) into definitions
    of its own, and read there ``Sum(w[c] * (y sp1 + (1 - y) sp2), n, c)`` was a product of
    three float reads, a contraction: a weighted BCE ran in bfloat16 under autocast, with
    1.7e-3 relative error where torch's weighted BCE is float32 (found by probing)."""
    op = Op(
        name="weighted_bce",
        inputs=["x[N, C]", "y[N, C]", "w[C]"],
        definitions=[
            "loss = Sum(w[c] * (y[n, c] * log(1 + exp(-x[n, c]))"
            " + (1 - y[n, c]) * log(1 + exp(x[n, c]))), n, c) / N"
        ],
    )
    assert 'AUTOCAST = "float32"' in module_source(op, "out")


def _gen():
    return torch.Generator().manual_seed(0)


# CPU autocasts to bfloat16; CUDA, where there is one, to float16 and bfloat16 (both measured
# on an H100 when this file changed: see docs/generated-modules.md)
AUTOCASTS = [("cpu", torch.bfloat16)] + (
    [("cuda", torch.float16), ("cuda", torch.bfloat16)] if torch.cuda.is_available() else []
)


@pytest.mark.parametrize("device, dtype", AUTOCASTS)
def test_linear_runs_in_the_autocast_dtype(device, dtype):
    from generated import linear

    g = _gen()
    x, W, b = (torch.randn(s, generator=g).to(device) for s in ((8, 16), (16, 4), (4,)))
    leaves = [t.clone().requires_grad_() for t in (x, W, b)]
    with torch.autocast(device, dtype=dtype):
        mine = linear.Function.apply(*leaves)
        want = F.linear(x, W.T, b)  # torch's: the autocast dtype too
    assert mine.dtype == want.dtype == dtype
    assert torch.allclose(mine.float(), want.float(), atol=0.1, rtol=0.02)
    mine.float().sum().backward()
    assert [t.grad.dtype for t in leaves] == [torch.float32] * 3  # grads in the leaves' dtype


@pytest.mark.parametrize(
    "name, reference",
    [
        ("layernorm", lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b)),
        ("softmax", lambda x: torch.softmax(x, -1)),
        ("log_softmax", lambda x: torch.log_softmax(x, -1)),
    ],
)
@pytest.mark.parametrize("device, dtype", AUTOCASTS)
def test_normalisations_run_in_float32_under_autocast(name, reference, device, dtype):
    module = importlib.import_module(f"generated.{name}")
    g = _gen()
    x = torch.randn(6, 10, generator=g).to(device, dtype)  # as a low-precision matmul hands it
    rest = (
        [torch.randn(10, generator=g).to(device) for _ in range(2)] if name == "layernorm" else []
    )
    with torch.autocast(device, dtype=dtype):
        mine = module.Function.apply(x, *rest)
        torch_s = reference(x, *rest)  # CUDA's lists: float32; CPU's keep these in bf16
    want = reference(x.float(), *rest)  # float32, as ours on every device
    assert mine.dtype == torch.float32
    assert torch.allclose(mine, want, atol=1e-6, rtol=1e-6)
    tol = 1e-6 if device == "cuda" else 0.05  # CPU's bf16 result: within its rounding
    assert torch.allclose(mine, torch_s.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("device, dtype", AUTOCASTS)
def test_cross_entropy_is_float32_under_autocast(device, dtype):
    """float32 throughout, as CPU's torch computes it; CUDA's torch 2.11 returns float32 but
    rounds on the way (2.5015625 against 2.5014319 in float32, on an H100): within that."""
    from generated import cross_entropy

    g = _gen()
    logits = torch.randn(5, 7, generator=g).to(device, dtype)
    targets = torch.tensor([0, 3, 6, 1, 2], device=device)
    with torch.autocast(device, dtype=dtype):
        mine = cross_entropy.Function.apply(logits, targets)
        torch_s = F.cross_entropy(logits, targets)
    assert mine.dtype == torch_s.dtype == torch.float32
    assert torch.allclose(mine, F.cross_entropy(logits.float(), targets), atol=1e-6)
    assert torch.allclose(mine, torch_s, atol=1e-6 if device == "cpu" else 1e-2)


@pytest.mark.parametrize("name", ["linear", "layernorm"])
def test_float64_inputs_stay_float64_under_autocast(name):
    """autocast casts float32 (and narrower) tensors, never float64 ones: F.linear and
    F.layer_norm of float64 inputs stay float64 under it (found by probing: linear was cast to
    bfloat16, 8e-3 off)."""
    module = importlib.import_module(f"generated.{name}")
    g = _gen()
    x = torch.randn(6, 10, generator=g, dtype=torch.float64)
    w, b = (torch.randn(10, generator=g, dtype=torch.float64) for _ in range(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if name == "linear":
            W = torch.randn(10, 4, generator=g, dtype=torch.float64)
            mine, want = module.Function.apply(x, W, b[:4]), F.linear(x, W.T, b[:4])
        else:
            mine, want = module.Function.apply(x, w, b), F.layer_norm(x, (10,), w, b)
    assert mine.dtype == want.dtype == torch.float64
    torch.testing.assert_close(mine, want, rtol=1e-12, atol=1e-12)


def test_tanh_keeps_its_input_dtype_under_autocast():
    from generated import tanh

    x = torch.randn(4, 3, generator=_gen()).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert tanh.Function.apply(x).dtype == torch.tanh(x).dtype == torch.bfloat16


def test_mixed_float_dtypes_are_promoted_outside_autocast():
    """Issue 23 item 4: a half x with float32 gain and bias, once refused."""
    from generated import layernorm

    g = _gen()
    x = torch.randn(4, 6, generator=g).half().requires_grad_()
    w, b = (torch.randn(6, generator=g).requires_grad_() for _ in range(2))
    out = layernorm.Function.apply(x, w, b)
    assert out.dtype == torch.float32
    want = F.layer_norm(x.float(), (6,), w, b)
    assert torch.allclose(out, want, atol=1e-6)
    out.sum().backward()
    assert (x.grad.dtype, w.grad.dtype, b.grad.dtype) == (torch.half, torch.float32, torch.float32)


def test_under_autocast_the_backward_matches_the_cast_model():
    """Gradients through the float32 policy equal autograd through explicit casts."""
    from generated import layernorm

    g = _gen()
    x = torch.randn(4, 6, generator=g).bfloat16().requires_grad_()
    w, b = (torch.randn(6, generator=g).requires_grad_() for _ in range(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mine = torch.autograd.grad(layernorm.Function.apply(x, w, b).pow(2).sum(), (x, w, b))
    want = torch.autograd.grad(F.layer_norm(x.float(), (6,), w, b).pow(2).sum(), (x, w, b))
    for got, ref in zip(mine, want, strict=True):
        assert got.dtype == ref.dtype
        assert torch.allclose(got.float(), ref.float(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "name, reference",
    [
        ("layernorm", lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b)),
        ("softmax", lambda x: torch.softmax(x, -1)),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
        ("tanh", torch.tanh),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_are_computed_in_float32_and_rounded_once(name, reference, dtype):
    """Outside autocast a half op is computed in float32 and its output rounded to the
    inputs' dtype, as torch's kernels do (found by probing: layernorm of float16 inputs ran
    kernel by kernel in float16, 48x F.layer_norm's error). Its error against float64 is
    torch's own, and the gradients come back in the inputs' dtype."""
    module = importlib.import_module(f"generated.{name}")
    g = _gen()
    x = (torch.randn(8, 1024, generator=g) * 0.01 + 1).to(dtype)
    rest = [torch.ones(1024, dtype=dtype), torch.zeros(1024, dtype=dtype)]
    rest = rest if name == "layernorm" else []
    exact = reference(x.double(), *(t.double() for t in rest))
    leaves = [t.clone().requires_grad_() for t in (x, *rest)]
    mine = module.Function.apply(*leaves)
    assert mine.dtype == reference(x, *rest).dtype == dtype
    err = (mine.double() - exact).abs().max()
    assert err <= 1.01 * (reference(x, *rest).double() - exact).abs().max() + 1e-12
    mine.float().pow(2).sum().backward()
    assert [t.grad.dtype for t in leaves] == [dtype] * len(leaves)


def test_a_compiled_backward_under_autocast_runs_in_float32():
    """Compiled under a bfloat16 autocast, a float32-policy op's backward ran in bfloat16:
    dynamo traced it with autocast off, so no autocast-off region was recorded, and
    AOTAutograd then ran the backward graph under the forward's autocast (avg_pool2d's
    gradient 2e-3 off, its conv_transpose2d in bfloat16; found by probing). The compiled
    gradient is the eager one, to float32's rounding (aot_eager: the graph AOTAutograd makes,
    which Inductor compiles; with Inductor itself too when this was found, 35 s more)."""
    from generated import avg_pool2d

    g = _gen()
    x = torch.randn(2, 3, 7, 6, generator=g)
    w = torch.randn(2, 3, 2, 2, generator=g)

    def grad(compiled):
        torch._dynamo.reset()
        leaf = x.clone().requires_grad_()
        f = lambda t: avg_pool2d.Function.apply(t, kernel_size=4, stride=3, padding=1)  # noqa: E731
        if compiled:
            f = torch.compile(f, fullgraph=True, backend="aot_eager")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = f(leaf)
        (out * w).sum().backward()
        return out.dtype, leaf.grad

    (eager_dtype, eager), (dtype, got) = grad(False), grad(True)
    assert dtype == eager_dtype == torch.float32
    assert torch.allclose(got, eager, rtol=1e-6, atol=1e-7)


def test_a_0d_input_takes_no_part_in_the_promotion(tmp_path):
    """As torch's ops: a float64 temperature beside float32 logits leaves the loss float32, a
    float32 one beside bfloat16 logits bfloat16 (it was float64 and float32; found probing).
    The 0-d input's gradient comes back in its own dtype."""
    from tests.modules.emitted import imported

    module, _ = imported("tests/cases/regularised_loss.py", tmp_path)
    g = _gen()
    targets = torch.randint(0, 5, (4,), generator=g)
    for wide, narrow in ((torch.float64, torch.float32), (torch.float32, torch.bfloat16)):
        logits = torch.randn(4, 5, generator=g).to(narrow).requires_grad_()
        W = torch.randn(5, 3, generator=g).to(narrow).requires_grad_()
        temperature = torch.tensor(1.5, dtype=wide, requires_grad=True)
        loss = module.Function.apply(logits, targets, W, temperature)
        assert loss.dtype == narrow
        want = F.cross_entropy(logits.float() / 1.5, targets) + 0.01 * (W.float() ** 2).sum()
        assert torch.allclose(loss.float(), want, rtol=1e-2 if narrow == torch.bfloat16 else 1e-6)
        loss.backward()
        assert (temperature.grad.dtype, logits.grad.dtype) == (wide, narrow)
