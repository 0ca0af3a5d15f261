"""``python -m bench.aten_calls``: how many aten calls one GPT training step issues, generated
against autograd (issue 27: at makemore's size the per-call overhead is the step).

Three variants: **A**, autograd through the model's torch forward (``train.models.gpt``'s
``autograd_step``: ``F.layer_norm``, ``F.gelu`` and ``F.cross_entropy`` are one fused kernel
each, forward and backward: issue 27's count); **D**, autograd through the same model written
out in decomposed torch ops (``bench.decomposed.gpt_loss``, the reference ``bench.ops`` times
the GPT row against); **G**, the generated step.

Two counts per variant, one step each after a warm-up step, float32 on the CPU:

- **profiled**: every ``aten::`` event torch's profiler records, nested calls included (an
  ``einsum`` counts once and so does each permute, reshape and bmm it makes), which is what a
  profile of the step shows;
- **dispatched**: the aten operators that reach the kernels (a ``TorchDispatchMode`` below
  autograd and below composite ops: ``einsum`` is its permutes and its ``bmm``; ``square`` is
  ``pow``), the calls a kernel runs for.

The count's own mode is hidden from the generated modules' ``_plain``, which asks the depth of
the dispatch-mode stack: a module under a tracing mode writes ``torch.add(r, t, alpha=c)`` out
as ``r + t * c`` (two kernels), and the count is of the path an eager step takes.

The steps are ``train.models.gpt``'s, sizes and batches are ``bench.gpt``'s. Counts are
deterministic: no timing, so no load to state.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections import Counter
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bench import decomposed
from bench.gpt import LR, SIZES, make_step, problem
from train.models.gpt import GPTConfig
from train.models.gpt_net import Params

VARIANTS = ("A", "D", "G")


class Counting(TorchDispatchMode):
    """Counts each aten operator that reaches dispatch below autograd."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _unseen() -> Iterator[None]:
    """The dispatch-mode stack one shallower while the count runs (its own mode unseen)."""
    depth = torch._C._len_torch_dispatch_stack
    torch._C._len_torch_dispatch_stack = lambda: depth() - 1
    try:
        yield
    finally:
        torch._C._len_torch_dispatch_stack = depth


def counts(name: str, size: str) -> tuple[Counter[str], Counter[str]]:
    """(profiled, dispatched) aten calls of one step of variant ``name`` (``VARIANTS``)."""
    config, params, batches = problem(SIZES[size], torch.float32, "cpu")
    one = torch.ones(())
    step = _decomposed_step(config) if name == "D" else make_step(name, config)
    step(params, *batches[0], one)  # warm-up: lazy initialisation stays out of the count
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step(params, *batches[1], one)
    profiled = Counter({e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")})
    with Counting() as mode, _unseen():
        step(params, *batches[2], one)
    return profiled, mode.calls


def _decomposed_step(config: GPTConfig):
    """``bench.gpt``'s SGD step with autograd through ``bench.decomposed.gpt_loss``."""

    def step(params: Params, X: torch.Tensor, Y: torch.Tensor, weight: torch.Tensor):
        leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        loss = decomposed.gpt_loss(leaves, X, Y, config.n_layer, config.n_head) * weight
        loss.backward()
        with torch.no_grad():
            grads = [leaves[k].grad for k in params]
            torch._foreach_add_(list(params.values()), grads, alpha=-LR)
        return loss.detach()

    return step


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.aten_calls", description=__doc__.split("\n")[0]
    )
    p.add_argument("--size", default="makemore", choices=list(SIZES))
    p.add_argument("--top", type=int, default=12, help="the most-called operators to list")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    result = {name: counts(name, args.size) for name in VARIANTS}
    print(
        f"GPT step ({args.size}), aten calls per step: autograd through fused ops (A), "
        "autograd through decomposed ops (D), generated (G)"
    )
    print("| count | A | D | G | G / A | G / D |")
    print("|---|---|---|---|---|---|")
    for k, label in enumerate(("profiled", "dispatched")):
        a, d, g = (sum(result[n][k].values()) for n in VARIANTS)
        print(f"| {label} | {a} | {d} | {g} | {g / a:.2f} | {g / d:.2f} |")
    for k, label in enumerate(("profiled", "dispatched")):
        print(f"\nmost {label} in G (A's and D's counts beside):")
        for op, n in result["G"][k].most_common(args.top):
            print(
                f"  {op:32s} {n:6d} {result['A'][k].get(op, 0):6d} {result['D'][k].get(op, 0):6d}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
