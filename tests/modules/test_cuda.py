"""Every generated op on a CUDA device, where there is one, held to the definitions' text.

The rest of the suite runs on the CPU, where CI runs; a module is torch code for any device,
but a kernel choice, a host check of an index (which must sync), a scatter's accumulation
order or Inductor's Triton codegen only show themselves on the device. Each op file (the
catalogue, tests/cases, tests/regressions) is run in float64 on ``DEVICE`` and compared with
the text oracle (:mod:`derive.verify.oracle`) evaluated on the CPU: the output and every
gradient to 1e-10, then ``gradcheck`` and ``gradgradcheck`` on the device. The catalogue and
the cases are also compiled there (``torch.compile(fullgraph=True)``, Inductor), forward and
backward equal to eager, and a bad index is refused before a kernel reads it.

``BACKGEN_TEST_DEVICE`` names the device (``cpu`` runs these same checks here, to try them);
without it they run where ``torch.cuda.is_available()`` and are skipped elsewhere.
"""

from __future__ import annotations

import glob
import importlib
import os
import runpy
import sys

import pytest
import torch

from derive.language import parse
from derive.verify.binding import InterpretError
from derive.verify.check import CheckFailed, defined_inputs
from derive.verify.oracle import oracle_gradients
from tests.modules.emitted import imported

DEVICE = os.environ.get("BACKGEN_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else "")
pytestmark = pytest.mark.skipif(not DEVICE, reason="no CUDA device (BACKGEN_TEST_DEVICE unset)")

CATALOGUE = sorted(glob.glob("ops/*.py"))
CASES = sorted(glob.glob("tests/cases/*.py"))
REGRESSIONS = sorted(glob.glob("tests/regressions/*.py"))
# one group per op file: under ``--dist loadgroup`` its tests share a worker, derived once
ALL = [pytest.param(p, marks=pytest.mark.xdist_group(p)) for p in CATALOGUE + CASES + REGRESSIONS]
COMPILED = ALL[: len(CATALOGUE) + len(CASES)]
TOL = 1e-10
FULL = 256  # float entries up to which gradcheck builds the whole Jacobian


def _close(mine: torch.Tensor, want: torch.Tensor, what: str, tol: float = TOL) -> None:
    mine, want = mine.detach().cpu(), want.detach().cpu()
    assert mine.shape == want.shape, f"{what}: shape {tuple(mine.shape)} != {tuple(want.shape)}"
    scale = max(1.0, float(want.abs().max())) if want.numel() else 1.0
    diff = float((mine - want).abs().max()) if want.numel() else 0.0
    assert diff <= tol * scale, f"{what}: differs by {diff:.3g} (scale {scale:.3g})"


def _setup(path: str, tmp_path, monkeypatch):
    """The op file's module (the catalogue's from generated/, as users import it; another
    imported by name, as dynamo needs), the op, its graph, and its checked inputs on the CPU."""
    if path.startswith("ops/"):
        op = runpy.run_path(path)["OP"]
        module = importlib.import_module(f"generated.{op.name}")
    else:
        module, op = imported(path, tmp_path)
        monkeypatch.setitem(sys.modules, module.__name__, module)
    g = parse(op)
    try:
        inputs, _ = defined_inputs(g, 0)
    except (CheckFailed, InterpretError, RuntimeError) as exc:
        if not path.startswith("tests/regressions/"):
            raise
        # a fuzz find at sizes its harness draws (a degenerate window): fuzz.check runs it
        pytest.skip(f"no checked draw of its own: {exc}")
    return module, op, g, inputs


def _leaves(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().to(DEVICE).clone().requires_grad_(t.is_floating_point()) for t in inputs]


def _floats(leaves: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t for t in leaves if t.is_floating_point()]


def _grad_out(shape: torch.Size) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize("path", ALL)
def test_on_the_device_the_output_and_gradients_are_the_definitions(path, tmp_path, monkeypatch):
    module, op, g, inputs = _setup(path, tmp_path, monkeypatch)
    leaves = _leaves(inputs)
    out = module.Function.apply(*leaves)
    assert out.device.type == DEVICE
    w = _grad_out(out.shape)
    want_out, want_grads = oracle_gradients(op, dict(zip(g.inputs, inputs, strict=True)), w)
    _close(out, want_out, "the output")
    if not out.requires_grad:
        return
    grads = torch.autograd.grad(out, _floats(leaves), w.to(DEVICE), allow_unused=True)
    names = [n for n, t in zip(g.inputs, inputs, strict=True) if t.is_floating_point()]
    for name, got in zip(names, grads, strict=True):
        assert got is None or got.device.type == DEVICE
        got = torch.zeros_like(want_grads[name]) if got is None else got
        _close(got, want_grads[name], f"the gradient of {name}")


@pytest.mark.parametrize("path", ALL)
def test_gradcheck_and_gradgradcheck_pass_on_the_device(path, tmp_path, monkeypatch):
    module, _, _, inputs = _setup(path, tmp_path, monkeypatch)
    leaves = _leaves(inputs)
    entries = sum(t.numel() for t in _floats(leaves))
    fast = entries > FULL
    with torch.no_grad():
        out = module.Function.apply(*leaves)
    # the output's rounding over the step, as derive.verify.check's gradcheck allows it
    atol = max(1e-5, 64 * float(out.abs().max()) * torch.finfo(out.dtype).eps / 1e-6)
    # CUDA's index_add_ and scatter_add_ add by atomics, in no fixed order, as torch's own
    # embedding backward does: a second backward may differ in the last bits (gradcheck found
    # constant_sum_from_a_fold "not reentrant" on an H100). Under use_deterministic_algorithms
    # every catalogue op's two backwards were bitwise equal there, as torch's own.
    nondet = 1e-10
    assert torch.autograd.gradcheck(
        module.Function.apply, leaves, atol=atol, fast_mode=fast, nondet_tol=nondet
    )
    assert torch.autograd.gradgradcheck(
        module.Function.apply, leaves, atol=max(1e-4, atol), fast_mode=True, nondet_tol=nondet
    )


@pytest.mark.parametrize("path", COMPILED)
def test_compiled_on_the_device_equals_eager(path, tmp_path, monkeypatch):
    module, _, _, inputs = _setup(path, tmp_path, monkeypatch)
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: module.Function.apply(*a), fullgraph=True)
    leaves, eager = _leaves(inputs), _leaves(inputs)
    out, want = compiled(*leaves), module.Function.apply(*eager)
    _close(out, want, "the compiled output")
    if not want.requires_grad:
        return
    w = _grad_out(out.shape).to(DEVICE)
    got = torch.autograd.grad(out, _floats(leaves), w, allow_unused=True)
    ref = torch.autograd.grad(want, _floats(eager), w, allow_unused=True)
    for k, (a, b) in enumerate(zip(got, ref, strict=True)):
        if b is not None:
            _close(a, b, f"the compiled gradient of float input {k}")


def test_a_bad_index_is_refused_on_the_device_before_a_kernel_reads_it():
    """An out-of-range index on CUDA is a device-side assert in torch's own kernels, which
    ends the process's CUDA context; the generated module checks it first and raises."""
    from generated import embedding

    C = torch.randn(5, 3, device=DEVICE)
    for bad in (5, -1):
        with pytest.raises(IndexError, match=r"embedding: idx has values in .*outside \[0, V=5\)"):
            embedding.Function.apply(torch.tensor([bad, 0], device=DEVICE), C)
    assert torch.equal(embedding.Function.apply(torch.tensor([4, 0], device=DEVICE), C), C[[4, 0]])
