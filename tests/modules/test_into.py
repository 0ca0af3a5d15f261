"""Kernels written into their spare operands (derive/ir/reuse.py) compute what they did.

``_into`` takes an operand's buffer only for results of at least ``INTO_LEAST`` entries, which
the small draws of the other tests never reach: here the threshold is 0, and every op is run
through its autograd.Function, first and second order, with the buffers taken and with none.
The results must be the same bits (the same kernels, only where they write differs); the
inputs, and the saved tensors a second backward reads again, must be unchanged. A write into a
tensor that something still reads (a view of an input, a saved activation, a name read by a
later statement) fails one of these.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from derive.emit.generate import load_op
from derive.verify.check import load_module, random_inputs
from tests.modules.emitted import imported

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((ROOT / "tests" / "cases").glob("*.py"))
CATALOGUE = sorted((ROOT / "ops").glob("*.py"))


def _same(a, b) -> None:
    if a is None or b is None:
        assert a is None and b is None
        return
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def _orders(module, inputs: list[torch.Tensor], seed: int) -> list:
    """Output, gradients and second-order gradients through ``module.Function``; the inputs
    checked unchanged, and the gradients taken twice from one graph (retain_graph: the saved
    tensors are read again, and must not have been written)."""
    before = [x.clone() for x in inputs]
    leaves = [x.clone().requires_grad_() if x.is_floating_point() else x for x in inputs]
    floats = [x for x in leaves if x.requires_grad]
    gen = torch.Generator().manual_seed(seed)
    out = module.Function.apply(*leaves)
    grad_out = torch.randn(out.shape, generator=gen, dtype=out.dtype)
    first = torch.autograd.grad(out, floats, grad_out, create_graph=True, allow_unused=True)
    again = torch.autograd.grad(out, floats, grad_out, retain_graph=True, allow_unused=True)
    for a, b in zip(first, again, strict=True):
        _same(None if a is None else a.detach(), b)
    given = [
        (g, torch.randn(g.shape, generator=gen, dtype=g.dtype)) for g in first if g is not None
    ]
    second: tuple = ()
    if any(g.requires_grad for g, _ in given):
        second = torch.autograd.grad(
            [g for g, _ in given if g.requires_grad],
            floats,
            [v for g, v in given if g.requires_grad],
            allow_unused=True,
        )
    for x, old in zip(inputs, before, strict=True):
        _same(x, old)
    detached = [None if g is None else g.detach() for g in (*first, *second)]
    return [out.detach(), *detached]


def _held(module, inputs: list[torch.Tensor]) -> tuple[list, int]:
    """Every result with buffers taken (the threshold at 0) and with none, compared; and how
    many buffers were taken."""
    taken = 0
    original = module._into

    def counting(kernel, *args, into=0):
        nonlocal taken
        result = original(kernel, *args, into=into)
        taken += result is args[into]
        return result

    module._into, least = counting, module.INTO_LEAST
    try:
        module.INTO_LEAST = float("inf")
        never = _orders(module, inputs, seed=1)
        assert taken == 0
        module.INTO_LEAST = 0
        always = _orders(module, inputs, seed=1)
    finally:
        module._into, module.INTO_LEAST = original, least
    assert len(never) == len(always)
    for a, b in zip(never, always, strict=True):
        _same(a, b)
    return always, taken


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_case_into_operands_changes_no_result(case: Path, tmp_path: Path) -> None:
    module, op = imported(case, tmp_path)
    if not hasattr(module, "_into"):
        pytest.skip("no kernel of this op writes into an operand")
    _held(module, random_inputs(op, seed=0, dtype=torch.float64))


@pytest.mark.parametrize("op_file", CATALOGUE, ids=lambda p: p.stem)
def test_catalogue_into_operands_changes_no_result(op_file: Path, tmp_path: Path) -> None:
    op = load_op(op_file)
    module = load_module(ROOT / "generated" / f"{op.name}.py")
    if not hasattr(module, "_into"):
        pytest.skip("no kernel of this op writes into an operand")
    _, taken = _held(module, random_inputs(op, seed=0, dtype=torch.float64))
    assert taken > 0  # the comparison above held something: buffers were taken


def test_a_buffer_is_taken_only_where_nothing_records_it() -> None:
    """Under autograd recording the kernels (grad mode on, an operand requiring grad) and
    under a torch.func transform, the result is a new tensor."""
    module = load_module(ROOT / "generated" / "gelu_tanh.py")
    x = torch.randn(300, 300, dtype=torch.float64)
    buffer = x * x
    assert module._into(torch.mul, buffer, x) is buffer  # eager, nothing recorded: taken
    leaf = x.clone().requires_grad_()
    assert module._into(torch.mul, leaf * 1, x) is not None
    made = leaf * 1
    assert module._into(torch.mul, made, x) is not made
    assert torch.func.vmap(lambda r: module._into(torch.mul, r * 1, r))(x).shape == x.shape
    wider = torch.randn(2, 300, 300, dtype=torch.float64)
    buffer = x * x
    assert module._into(torch.mul, buffer, wider) is not buffer  # broadcasts wider: new
    buffer = x * x
    assert module._into(torch.mul, buffer, x.float()) is not buffer  # another float dtype


def test_a_write_into_an_input_is_caught(tmp_path: Path) -> None:
    """The negative control: GELU's backward writing into its saved input x instead of the
    product made for it (``_into(torch.mul, product, x, into=1)`` where the pass wrote into
    the product) is caught: by autograd's version counter of the saved tensor, or by the
    comparisons."""
    text = (ROOT / "generated" / "gelu_tanh.py").read_text()
    wrote = "                        x,\n                    ),\n                    1.59576"
    wrong = text.replace(wrote, wrote.replace("x,\n", "x,\n                        into=1,\n", 1))
    assert wrong != text
    path = tmp_path / "gelu_tanh.py"
    path.write_text(wrong)
    module = load_module(path)
    with pytest.raises((AssertionError, RuntimeError), match="mismatch|modified by an inplace"):
        _held(module, [torch.randn(6, 5, dtype=torch.float64)])


@pytest.mark.parametrize("name", ["gelu_tanh", "layernorm", "causal_self_attention"])
def test_autograd_batched_gradients_take_no_buffer(name: str) -> None:
    """Autograd's batched gradients (jacobian with vectorize=True) run the backward under
    torch's legacy vmap, which has no batching rule for a kernel's out=: with every buffer
    otherwise taken (the threshold at 0), the vectorized jacobian is the one taken row by row."""
    op = load_op(ROOT / "ops" / f"{name}.py")
    module = load_module(ROOT / "generated" / f"{name}.py")
    inputs = random_inputs(op, seed=0, dtype=torch.float64)
    floats = [k for k, t in enumerate(inputs) if t.is_floating_point()]

    def f(*xs):
        args = list(inputs)
        for k, x in zip(floats, xs, strict=True):
            args[k] = x
        return module.Function.apply(*args)

    xs = tuple(inputs[k] for k in floats)
    least, module.INTO_LEAST = module.INTO_LEAST, 0
    try:
        batched = torch.autograd.functional.jacobian(f, xs, vectorize=True)
        rows = torch.autograd.functional.jacobian(f, xs)
    finally:
        module.INTO_LEAST = least
    for a, b in zip(batched, rows, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
