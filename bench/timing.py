"""Interleaved timing: A B G ... A B G ..., so drift and other load hit every variant alike.

Two schedules. ``time_interleaved`` runs the variants in one fixed order (the MLP and GPT step
benches). ``time_rotated`` starts round r at variant r mod k, so no variant always follows the
same one (whose leftover cache state or freed memory it would inherit), and records for each
block the share of a core the process got: a round where a block got less than ``QUIET`` was
shared with other processes.

Each round runs every variant for a block of ``inner`` steps (sized in the warm-up to about
``block_s``, so a 0.3 ms step is not timed one call at a time) and records seconds per step.
Ratios are taken round by round (t_v / t_A in the same round) and summarised by their median
and quartiles: a pairing that a ratio of two medians would lose.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bench.machine import cpu_seconds, others_cores

Runner = Callable[[int], object]  # runner(round_index) runs one step
QUIET = 0.9  # a block that got less of its core than this shared it with other processes


@dataclass
class Spread:
    """Median and quartiles of a list of numbers, plus its extremes."""

    median: float
    q1: float
    q3: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if len(values) == 1:
            return cls(values[0], values[0], values[0], values[0], values[0])
        q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(median, q1, q3, min(values), max(values))


@dataclass
class Timing:
    """Seconds per step in each round, and how many steps each round's block ran."""

    per_step_s: list[float]
    inner: int

    @property
    def spread(self) -> Spread:
        return Spread.of(self.per_step_s)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _block(run: Runner, round_index: int, inner: int, device: str) -> float:
    """Seconds per step over ``inner`` back-to-back steps."""
    _sync(device)
    start = time.perf_counter()
    for _ in range(inner):
        run(round_index)
    _sync(device)
    return (time.perf_counter() - start) / inner


def warm_up(runners: dict[str, Runner], rounds: int, block_s: float, device: str) -> dict:
    """Run every variant ``rounds`` times, interleaved; return each one's ``inner`` count."""
    last = {}
    for r in range(max(1, rounds)):
        for name, run in runners.items():
            last[name] = _block(run, r, 1, device)
    return {name: max(1, math.ceil(block_s / max(s, 1e-9))) for name, s in last.items()}


def time_interleaved(
    runners: dict[str, Runner], rounds: int, warmup: int, block_s: float, device: str
) -> dict[str, Timing]:
    """Warm up, then ``rounds`` rounds over all runners in order; GC paused while timing."""
    inner = warm_up(runners, warmup, block_s, device)
    times: dict[str, list[float]] = {name: [] for name in runners}
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            for name, run in runners.items():
                times[name].append(_block(run, r, inner[name], device))
    finally:
        gc.enable()
    return {name: Timing(times[name], inner[name]) for name in runners}


def paired_ratio(timing: Timing, reference: Timing) -> Spread:
    """Per-round t / t_ref, summarised: below 1 means faster than the reference."""
    ratios = [t / r for t, r in zip(timing.per_step_s, reference.per_step_s, strict=True)]
    return Spread.of(ratios)


@dataclass
class Round:
    """One rotated round: its order, each block's (seconds per call, cores used), the load."""

    order: list[str]
    blocks: dict[str, tuple[float, float]]  # (seconds per call, CPU seconds per wall second)
    load_avg: float
    others: float | None  # cores other processes kept busy during the round, machine-wide

    @property
    def shared(self) -> bool:
        return min(core for _, core in self.blocks.values()) < QUIET


def _cpu_block(run: Callable[[], object], calls: int, device: str) -> tuple[float, float]:
    """(seconds per call, cores this process used) over ``calls`` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        run()
        _sync(device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / calls, cpu / wall


def time_rotated(
    runs: dict[str, Callable[[], object]], rounds: int, block_s: float, device: str
) -> list[Round]:
    """Warm up, then ``rounds`` rounds; round r starts at variant r mod k. GC paused."""
    names = list(runs)
    for _ in range(3):  # the first call compiles (JAX) or fills caches
        last = {name: _cpu_block(run, 1, device)[0] for name, run in runs.items()}
    calls = {name: max(1, math.ceil(block_s / s)) for name, s in last.items()}
    measured = []
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            start, wall, load = cpu_seconds(), time.perf_counter(), os.getloadavg()[0]
            blocks = {name: _cpu_block(runs[name], calls[name], device) for name in order}
            measured.append(
                Round(order, blocks, load, others_cores(start, time.perf_counter() - wall))
            )
    finally:
        gc.enable()
    return measured
