"""Every variant against A on the same batch, before anything is timed.

The gradients are read back from the update itself, ``g = (p_before - p_after) / lr``, so the
check covers the SGD update too: torch.compile has silently miscompiled ``p.add_(g, alpha=-lr)``
after a matmul in this torch version, and a wrong update would be timed as a fast one.

float64 is the real check (two correct backwards agree to ~1e-13 there); float32 runs the very
graphs that are timed (a compiled variant compiles per dtype) and only has to be close.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from bench.problem import Problem
from bench.variants import Variant

# max |g - g_A| / max |g_A| over all parameters; reading g back from the update costs about
# eps * |p| / lr of it (1e-15 in float64, 1e-5 in float32)
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-3}


@dataclass
class Outcome:
    """A variant's loss and the gradients its update applied, in one dtype."""

    loss: torch.Tensor
    grads: dict[str, torch.Tensor]
    seconds: float  # wall time of this call: for a compiled variant, its compilation


@dataclass
class CheckResult:
    """Agreement with A, as relative differences, per dtype; ``error`` if the step raised."""

    ok: bool
    grad_diff: dict[str, float]
    loss_diff: dict[str, float]
    first_call_s: float | None = None  # the float32 call: compile time for compiled variants
    error: str | None = None


def run_once(variant: Variant, problem: Problem, lr: float) -> Outcome:
    """One step on fresh copies of the parameters and the first batch."""
    params = problem.copy_params(variant.autograd)
    before = {k: v.detach().clone() for k, v in params.items()}
    X, Y = problem.batches[0]
    start = time.perf_counter()
    loss = variant.step(params, X, Y, lr)
    if loss.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    grads = {k: (before[k] - params[k].detach()) / lr for k in params}
    return Outcome(loss.detach(), grads, seconds)


def relative_diffs(got: Outcome, ref: Outcome) -> tuple[float, float]:
    """(gradient diff, loss diff), each relative to the reference's largest magnitude."""
    scale = max(float(g.abs().max()) for g in ref.grads.values())
    grad = max(float((got.grads[k] - g).abs().max()) for k, g in ref.grads.items()) / scale
    loss = float((got.loss - ref.loss).abs()) / max(1.0, float(ref.loss.abs()))
    return grad, loss


def reference(problems: dict[torch.dtype, Problem], a: Variant, lr: float) -> dict:
    """A's outcome per dtype: what every other variant is compared with."""
    return {dtype: run_once(a, problem, lr) for dtype, problem in problems.items()}


def check_variant(
    variant: Variant,
    problems: dict[torch.dtype, Problem],
    refs: dict[torch.dtype, Outcome],
    lr: float,
) -> CheckResult:
    """float64 first, then float32; a non-finite or too-large difference makes it wrong."""
    result = CheckResult(ok=True, grad_diff={}, loss_diff={})
    for dtype in (torch.float64, torch.float32):
        try:
            got = run_once(variant, problems[dtype], lr)
        except Exception as exc:  # a variant that cannot run is reported, not fatal
            return CheckResult(False, result.grad_diff, result.loss_diff, error=_one_line(exc))
        grad, loss = relative_diffs(got, refs[dtype])
        key = str(dtype).removeprefix("torch.")
        result.grad_diff[key], result.loss_diff[key] = grad, loss
        if not (grad <= TOLERANCE[dtype] and loss <= TOLERANCE[dtype]):  # NaN fails too
            result.ok = False
            return result
        result.first_call_s = got.seconds
    return result


def _one_line(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text[:200]
