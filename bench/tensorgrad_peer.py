"""The tensorgrad column of ``python -m bench.ops``: the other symbolic peer's derivation.

tensorgrad (PyPI ``tensorgrad``) derives a gradient symbolically, as backgen does, and compiles
the result to torch code. Imported only where it is installed (never a dependency of backgen):
the caller catches the ImportError and leaves the column out with a note. Each row is written
in tensorgrad's named-edge language from its primitives, as the op file defines it (mean, sum,
pow, exp, tanh; its ``cross_entropy``, ``softmax`` and ``log_softmax``), asked for the loss and
its gradients (a tensor output: the gradients of ``<out, cotangent>``), compiled once per shape
and dtype, and run on the row's own inputs; what its compiler maps onto a fused torch kernel
is part of what is measured. Rows not written in it (the GPT step, attention) are skipped.

How each row is written, where tensorgrad asks for more than the definition:

- integer targets have no gather: they are one-hot floats, ``one_hot(targets)`` inside the
  program (the row's inputs are the integer targets);
- one gradient alone takes tensorgrad's chain-rule path, whose intermediates grow a degree per
  contraction ((8, 8, 8, 5) at (8, 5)); asked for two or more, it runs one reverse sweep. Each
  row asks for a second gradient (the targets' or the cotangent's) and drops it;
- the MLP's embedding is ``one_hot(X) @ C``, its first weight seen as (block, emb, hidden).

``CompiledProgram.__call__`` (tensorgrad 0.3.0) names its tensors with ``Tensor.rename``,
which torch 2.13 no longer has; the run calls the function ``codegen.specialize(dims, dtype)``
returns, the code that call runs, without the naming, and permutes outputs as it would.
"""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Callable
from fractions import Fraction

import sympy as sp
import tensorgrad as tg
import tensorgrad.functions as tgf
import torch
from tensorgrad.compiler.runtime import CompiledProgram

# a built row: (outputs, feed(inputs, dtype) -> (values by variable name, sizes), unpack(outs))
Built = tuple[list, Callable, Callable]
HALF = Fraction(-1, 2)


def version() -> str:
    return f"tensorgrad {importlib.metadata.version('tensorgrad')}"


class Program:
    """One tensorgrad program, specialised per (sizes, dtype) on first use."""

    def __init__(self, outputs: list) -> None:
        self.program = CompiledProgram(tuple(outputs))
        self.specialised: dict = {}

    def bind(self, values: dict, sizes: dict, dtype: torch.dtype) -> Callable[[], tuple]:
        key = (tuple(sorted((s.name, n) for s, n in sizes.items())), dtype)
        if key not in self.specialised:
            self.specialised[key] = self.program.codegen.specialize(sizes, dtype=dtype)
        fn = self.specialised[key]
        args = [values[v.name] for v in self.program.vars]
        perms = [perm for perm, _ in self.program._wrap_plans]

        def run() -> tuple:
            with torch.no_grad():
                outs = fn(*args)
            return tuple(o if p is None else o.permute(p) for o, p in zip(outs, perms))

        return run


def _cross_entropy(inputs) -> Built:
    n, c = sp.symbols("n c")
    logits, targets = tg.Variable("logits", n, c), tg.Variable("targets", n)
    loss = tgf.sum(tgf.cross_entropy(logits, tgf.one_hot(targets, c), dim="c")) / tg.Delta(n)

    def feed(inp, dtype):
        (x,), (t,) = inp.floats, inp.others
        return {"logits": x, "targets": t.to(dtype)}, {n: x.shape[0], c: x.shape[1]}

    outputs = [loss, loss.grad(logits), loss.grad(targets)]
    return outputs, feed, lambda o: (o[0], (o[1],))


def _layernorm(x, gain, bias, n_rows, eps=1e-5):
    diff = x - tgf.mean(x, "c", keepdims=True)
    rstd = tgf.pow(tgf.mean(diff * diff, "c", keepdims=True) + eps, HALF)
    return gain * (diff * rstd) + bias


def _batchnorm(x, gain, bias, n_rows, eps=1e-5):
    diff = x - tgf.sum(x, "n", keepdims=True) / n_rows
    rstd = tgf.pow(tgf.sum(diff * diff, "n", keepdims=True) / (n_rows - 1) + eps, HALF)
    return gain * (diff * rstd) + bias


def _gelu_tanh(x):
    return 0.5 * x * (1 + tgf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tgf.pow(x, 3))))


def _vjp(forward: Callable, n_affine: int) -> Callable:
    """A tensor output: the gradients of ``<out, cotangent>`` in x (and gain, bias), with the
    cotangent's own gradient (the output) asked for too, so that tensorgrad sweeps once."""

    def build(inputs) -> Built:
        n, c = sp.symbols("n c")
        x, cot = tg.Variable("x", n, c), tg.Variable("cot", n, c)
        affine = [tg.Variable("gain", c), tg.Variable("bias", c)][:n_affine]
        rows = inputs.floats[0].shape[0]
        out = forward(x, *affine, rows) if n_affine else forward(x)
        dot = out @ cot
        outputs = [dot.grad(cot), *(dot.grad(v) for v in (x, *affine))]

        def feed(inp, dtype):
            values = dict(zip(["x", "gain", "bias"], inp.floats)) | {"cot": inp.cotangent}
            return values, {n: inp.floats[0].shape[0], c: inp.floats[0].shape[1]}

        return outputs, feed, lambda o: (o[0], tuple(o[1:]))

    return build


def _mlp(inputs) -> Built:
    """embedding -> linear -> batchnorm (n-1) -> tanh -> linear -> mean cross-entropy."""
    rows = inputs.others[0].shape[0]
    n, t, e, h, v = sp.symbols("n t e h v")
    C, W1, b1 = tg.Variable("C", v, e), tg.Variable("W1", t, e, h), tg.Variable("b1", h)
    W2, b2 = tg.Variable("W2", h, v), tg.Variable("b2", v)
    gain, bias = tg.Variable("bngain", h), tg.Variable("bnbias", h)
    X, Y = tg.Variable("X", n, t), tg.Variable("Y", n)
    hpre = (tgf.one_hot(X, v) @ C) @ W1 + b1
    diff = hpre - tgf.sum(hpre, "n", keepdims=True) / rows
    rstd = tgf.pow(tgf.sum(diff * diff, "n", keepdims=True) / (rows - 1) + 1e-5, HALF)
    logits = tgf.tanh(gain * (diff * rstd) + bias) @ W2 + b2
    loss = tgf.sum(tgf.cross_entropy(logits, tgf.one_hot(Y, v), dim="v")) / rows
    params = [C, W1, b1, W2, b2, gain, bias]

    def feed(inp, dtype):
        (Cv, W1v, b1v, W2v, b2v, gv, bv), (Xv, Yv) = inp.floats, inp.others
        (V, E), T = Cv.shape, Xv.shape[1]
        values = dict(C=Cv, W1=W1v.view(T, E, -1), b1=b1v, W2=W2v, b2=b2v, bngain=gv)
        values |= dict(bnbias=bv, X=Xv.to(dtype), Y=Yv.to(dtype))
        return values, {n: Xv.shape[0], t: T, e: E, h: W1v.shape[1], v: V}

    def unpack(o):
        grads = list(o[1:])
        grads[1] = grads[1].reshape(-1, grads[1].shape[-1])  # (t, e, h) as W1's (t e, h)
        return o[0], tuple(grads)

    return [loss, *(loss.grad(p) for p in params)], feed, unpack


ROWS: dict[str, Callable] = {
    "layernorm-large": _vjp(_layernorm, 2),
    "layernorm-gpt": _vjp(_layernorm, 2),
    "gelu_tanh": _vjp(_gelu_tanh, 0),
    "batchnorm": _vjp(_batchnorm, 2),
    "cross_entropy": _cross_entropy,
    "softmax": _vjp(lambda x: tgf.softmax(x, "c"), 0),
    "log_softmax": _vjp(lambda x: tgf.log_softmax(x, "c"), 0),
    "mlp-makemore": _mlp,
    "mlp-medium": _mlp,
    "mlp-large": _mlp,
}


def prepare(key: str) -> Callable | None:
    """The row's Prepare (inputs -> run), or None where the row is not written in tensorgrad.
    The program is derived at the first inputs (its sizes may be python numbers: the batch)."""
    if key not in ROWS:
        return None
    programs: dict = {}

    def make(inputs) -> Callable[[], tuple]:
        if "built" not in programs:
            outputs, feed, unpack = ROWS[key](inputs)
            programs["built"] = (Program(outputs), feed, unpack)
        program, feed, unpack = programs["built"]
        values, sizes = feed(inputs, inputs.floats[0].dtype)
        run = program.bind(values, sizes, inputs.floats[0].dtype)
        return lambda: unpack(run())

    return make
