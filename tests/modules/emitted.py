"""Each op file's module text, derived once per test session.

test_check, test_stability, test_second_order, test_forward_mode and test_widest hold the same
modules of tests/cases/ (and layernorm's, for their negative controls) to different
comparisons. Deriving is most of a case's time, so each op file is derived once (per process);
every test writes the text into its own folder and imports a fresh module from there: the
program as rendered, laid out by black only for a test that reads or edits the text. A test
that changes the derivation itself (a monkeypatched rule) calls ``module_source`` directly.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from derive import Op
from derive.emit.generate import load_op, module_program
from derive.emit.module import laid_out
from derive.language import parse
from derive.verify.check import load_module
from derive.verify.oracle import oracle_output

# The header's ``--out``; the module's code does not depend on it.
OUT = "out"


@functools.cache
def _program(path: Path) -> tuple[Op, str]:
    op = load_op(path)
    return op, module_program(op, OUT)


@functools.cache
def _source(path: Path) -> tuple[Op, str]:
    op, program = _program(path)
    return op, laid_out(program, op.name)


def program(op_file: str | Path) -> str:
    """The op file's module as the template renders it, derived once per process."""
    return _program(Path(op_file).resolve())[1]


def emitted(op_file: str | Path, folder: Path, formatted: bool = True) -> tuple[Path, Op]:
    """The op file's module written to ``folder``: its path and the op. ``formatted``: as
    ``generate`` writes it (black), else as the template renders it (the same program)."""
    op, text = (_source if formatted else _program)(Path(op_file).resolve())
    path = folder / f"{op.name}.py"
    path.write_text(text)
    return path, op


def imported(op_file: str | Path, folder: Path):
    """The op file's module, written to ``folder`` and imported from there, and the op: the
    program unformatted (black, a third of a case's time, changes no syntax tree; tests that
    read the text take :func:`emitted`'s)."""
    path, op = emitted(op_file, folder, formatted=False)
    return load_module(path), op


def as_functions(op: Op, module, inputs: list) -> tuple:
    """``(mine, text, xs)``: the op as a function of its float inputs (its int inputs fixed at
    ``inputs``'), through the generated ``Function`` and through the text oracle, and those
    float inputs; what torch.func's and autograd's batched transforms take."""
    names = list(parse(op).inputs)
    floats = [k for k, t in enumerate(inputs) if t.is_floating_point()]

    def call(apply):
        def f(*xs):
            args = list(inputs)
            for k, x in zip(floats, xs, strict=True):
                args[k] = x
            return apply(args)

        return f

    mine = call(lambda args: module.Function.apply(*args))
    text = call(lambda args: oracle_output(op, dict(zip(names, args, strict=True))))
    return mine, text, tuple(inputs[k] for k in floats)


def hessian_in(f, xs: tuple, w: torch.Tensor, k: int) -> torch.Tensor:
    """The Hessian of ``<w, f(xs)>`` in ``xs[k]`` alone, the other inputs held: torch.func's
    forward over reverse with one input of several differentiated."""

    def scalar(x):
        return (f(*xs[:k], x, *xs[k + 1 :]) * w).sum()

    return torch.func.hessian(scalar)(xs[k])


def against_autograd(module, args: list, ref, gen: torch.Generator, rtol: float = 1e-12) -> tuple:
    """``module``'s forward and backward on ``args`` held to autograd through ``ref`` (plain
    torch on the same tensors, a random cotangent from ``gen``): ``(generated, autograd)``,
    the most entries of any tensor each made (:class:`bench.widest.Widest`)."""
    from bench.widest import Widest  # bench imports torch's dispatch modes: only when asked

    leaves = [a.clone().requires_grad_() if a.is_floating_point() else a for a in args]
    floats = [x for x in leaves if x.requires_grad]
    with Widest() as autograd:
        want = ref(*leaves)
        grad_out = torch.randn(want.shape, generator=gen, dtype=want.dtype)
        want_grads = torch.autograd.grad(want, floats, grad_out)
    with Widest() as generated:
        out, saved = module.forward(*args)
        grads = [g for g in module.backward(grad_out, saved) if g is not None]
    torch.testing.assert_close(out, want.detach(), rtol=rtol, atol=rtol / 10)
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=rtol * 10, atol=rtol)
    return generated.entries, autograd.entries
