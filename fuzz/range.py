"""Range mode (``python -m fuzz --range``): the same random ops at inputs far from the unit
range; a forward that is finite with a gradient that is not is a finding.

The standard it checks: where the forward is finite, the backward and the tangent (forward
mode) are finite too (logits of 1e4, a sigmoid at -800). The value check (:mod:`fuzz.check`)
draws inputs in [-1.5, 1.5], where nothing overflows; here each op's float inputs, drawn the
same way, are scaled by 30 and by 300 (``exp(300)`` is finite in float64, ``exp(900)`` is
not), and the generated module runs forward, backward (a random ``grad_out``) and jvp.

A draw counts only when the output and every tensor the forward saves are finite (-inf where a
``where()`` masks a score is let through): an output that is finite only through an overflowed
intermediate (``x / inf = 0``) has no finite gradient to ask for. A finding says which gradient
is non-finite, at which scale, and whether torch autograd through the definitions as written
(the reference interpreter, :mod:`derive.verify.reference`) is finite there: ``autograd
finite`` means the generated backward lost range that the written form has; ``autograd too``
that both are finite only in exact arithmetic (``softplus(w)**-2 * sigmoid(w)`` at w = -450:
e^900 overflows before e^-450 brings it back).

Statuses: passed, refused (as in the value check), skipped (no draw counts), nonfinite, and
wrong for a crash or a timeout.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from derive.emit.generate import module_program
from derive.errors import DerivationError
from derive.language import Graph, Op, parse
from derive.verify.oracle import oracle_tangent, tangent
from derive.verify.reference import autograd_reference
from fuzz.check import Outcome, draw_inputs, judged, tame, timed

SCALES = (30.0, 300.0)


def _scaled(graph: Graph, seed: int, scale: float) -> dict[str, torch.Tensor]:
    inputs = draw_inputs(graph, seed, distinct=True)
    return {k: v * scale if v.is_floating_point() else v for k, v in inputs.items()}


def _autograd_finite(graph: Graph, inputs: dict, grad_out: torch.Tensor, name: str) -> bool:
    """Whether autograd through the written definitions gives a finite gradient of ``name``."""
    try:
        grads = autograd_reference(graph, inputs, grad_out)
    except Exception:  # the reference's own trouble (memory, a domain error): not finite
        return False
    return name in grads and tame([grads[name]], math.inf)


SKIP = ("skip", "")  # a draw that does not count: the forward is not finite


def _draw(module, graph: Graph, seed: int, scale: float) -> tuple[str, str] | None:
    """One scaled draw: None when it passes, :data:`SKIP`, or a finding (kind, detail)."""
    inputs = _scaled(graph, seed, scale)
    params = {p.name: v for p, v in graph.params.items()}
    with torch.no_grad():
        out, saved = module.forward(*[inputs[n] for n in graph.inputs], **params)
    kept = [t for t in saved if isinstance(t, torch.Tensor)]
    if not tame([out], math.inf) or not tame(kept, math.inf, masked=True):
        return SKIP
    gen = torch.Generator().manual_seed(seed + 1)
    grad_out = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        grads = module.backward(grad_out.clone(), saved)
    for name, grad in zip(graph.inputs, grads, strict=True):
        if grad is not None and not tame([grad], math.inf):
            also = "finite" if _autograd_finite(graph, inputs, grad_out, name) else "too"
            return f"backward non-finite, autograd {also}", f"d{name} at inputs x{scale:g}"
    return _tangent_draw(module, graph, inputs, gen, scale)


def _tangent_draw(module, graph: Graph, inputs: dict, gen, scale: float) -> tuple | None:
    """The derived tangent along random directions, finite where the forward is; a finding
    says whether torch's forward mode through the definitions as written is finite there."""
    if hasattr(module, "JVP_NOT_DERIVED"):
        return None
    directions = {
        n: torch.randn(t.shape, generator=gen, dtype=t.dtype)
        for n, t in inputs.items()
        if t.is_floating_point()
    }
    if tame([tangent(module.Function.apply, inputs, directions)], math.inf):
        return None
    try:
        written = tame([oracle_tangent(graph.op, inputs, directions)], math.inf)
    except Exception:  # the oracle's own trouble: not finite
        written = False
    also = "finite" if written else "too"
    return f"tangent non-finite, forward mode {also}", f"t_{graph.output} at inputs x{scale:g}"


def run_range_case(
    op: Op,
    seed: int,
    timeout: float | None = 60.0,
    source: Callable = module_program,
    scales: tuple[float, ...] = SCALES,
) -> Outcome:
    """Derive and emit ``op``, then run it at each of ``scales`` (see the module docstring)."""
    return timed(_run, op, seed, timeout, source, scales)


def _run(op: Op, seed: int, timeout: float | None, source: Callable, scales) -> Outcome:
    try:
        graph = parse(op)
    except DerivationError as exc:
        return Outcome("refused", "parse", str(exc))

    def judge(module) -> Outcome:
        counted = 0
        for scale in scales:
            found = _draw(module, graph, seed, scale)
            if found is not None and found != SKIP:
                return Outcome("nonfinite", *found)
            counted += found is None
        if not counted:
            return Outcome("skipped", "not finite", f"forward not finite at every scale {scales}")
        return Outcome("passed")

    return judged(op, timeout, source, judge)
