"""``python -m train.models.classifier_speed``: training steps/s, generated against autograd,
interleaved.

Whole-run steps/s on a shared machine mostly measure the neighbours. Here both backwards train
the same default run side by side: rounds of ``--block`` steps each, the order alternating
round by round, and the median steps/s over rounds is reported per backward, with the median of
the per-round ratios. A step is what the run loop times: minibatch, loss and gradients, gradient
norm (and clipping), optimizer update.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch

from train.engine import new_run
from train.models.classifier import SPEC, STEPS, Run, take_step
from train.models.classifier_data import load_data
from train.models.classifier_options import with_defaults


def timed_steps(run: Run, n: int) -> float:
    """Seconds for ``n`` steps of ``run`` (it keeps training from where it is)."""
    X, Y = run.data.X_train.to(run.config.torch_dtype), run.data.Y_train
    started = time.perf_counter()
    for _ in range(n):
        take_step(run, X, Y, STEPS[run.config.backward])
    return time.perf_counter() - started


def compare(optimizer: str, rounds: int, block: int) -> dict[str, float]:
    """Median steps/s of each backward and the median per-round ratio generated/autograd."""
    config = with_defaults({"optimizer": optimizer, "steps": 10**9})
    data = load_data("digits")
    unwatched = argparse.Namespace(monitor_every=10**9)
    runs = {
        b: new_run(SPEC, replace(config, backward=b), data, unwatched)
        for b in ("generated", "autograd")
    }
    rates: dict[str, list[float]] = {b: [] for b in runs}
    for r in range(rounds):
        for b in sorted(runs, reverse=bool(r % 2)):
            rates[b].append(block / timed_steps(runs[b], block))
    ratios = [g / a for g, a in zip(rates["generated"], rates["autograd"])]
    result = {b: statistics.median(v) for b, v in rates.items()}
    return {**result, "ratio": statistics.median(ratios)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m train.models.classifier_speed", description=__doc__)
    p.add_argument("--optimizers", default="sgd,rmsprop,adam", help="(%(default)s)")
    p.add_argument("--rounds", type=int, default=10, help="(%(default)s)")
    p.add_argument("--block", type=int, default=50, help="steps per round (%(default)s)")
    p.add_argument("--threads", type=int, default=1, help="(%(default)s)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    print("| optimizer | generated steps/s | autograd steps/s | generated / autograd |")
    print("|---|---:|---:|---:|")
    for name in args.optimizers.split(","):
        r = compare(name, args.rounds, args.block)
        print(f"| {name} | {r['generated']:,.0f} | {r['autograd']:,.0f} | {r['ratio']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
