"""``python -m bench.aten_calls``: how many aten calls one GPT training step issues, generated
against autograd (issue 27: at makemore's size the per-call overhead is the step).

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

The step is ``train.models.gpt``'s, sizes and batches are ``bench.gpt``'s. Counts are
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

from bench.gpt import SIZES, make_step, problem


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
    """(profiled, dispatched) aten calls of one step of variant ``name`` ("A" or "G")."""
    config, params, batches = problem(SIZES[size], torch.float32, "cpu")
    one = torch.ones(())
    step = make_step(name, config)
    step(params, *batches[0], one)  # warm-up: lazy initialisation stays out of the count
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step(params, *batches[1], one)
    profiled = Counter({e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")})
    with Counting() as mode, _unseen():
        step(params, *batches[2], one)
    return profiled, mode.calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.aten_calls", description=__doc__.split("\n")[0]
    )
    p.add_argument("--size", default="makemore", choices=list(SIZES))
    p.add_argument("--top", type=int, default=12, help="the most-called operators to list")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    result = {name: counts(name, args.size) for name in ("A", "G")}
    print(f"GPT step ({args.size}), aten calls per step: autograd (A), generated (G)")
    print("| count | A | G | G / A |")
    print("|---|---|---|---|")
    for k, label in enumerate(("profiled", "dispatched")):
        a, g = (sum(result[n][k].values()) for n in ("A", "G"))
        print(f"| {label} | {a} | {g} | {g / a:.2f} |")
    for k, label in enumerate(("profiled", "dispatched")):
        print(f"\nmost {label} in G (A's count beside):")
        for op, n in result["G"][k].most_common(args.top):
            print(f"  {op:32s} {n:6d} {result['A'][k].get(op, 0):6d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
