"""One benchmark run: per size, check every variant, time the ones that agree, measure memory.

Dynamo is reset before each size so every compiled variant gets its own static graphs and no
size inherits another's recompilations.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import torch

from bench import memory
from bench.catalogue import time_generate
from bench.check import CheckResult, check_variant, reference
from bench.floor import floor_runner
from bench.graphs import GraphReport, explain
from bench.machine import cpu_seconds, load_average, machine_info, others_cores
from bench.problem import LR, Problem, Size, make_problem
from bench.timing import Runner, Spread, Timing, paired_ratio, time_interleaved
from bench.variants import Variant, build_variants

REFERENCES = ("A", "B", "F")  # the tables' ratios are to these (F: the floor, bench/floor.py)


@dataclass
class BenchConfig:
    """What to run and how long; ``quick`` and the full run differ only in these numbers."""

    sizes: list[Size]
    variants: list[str]
    rounds: int = 30
    warmup: int = 3
    block_s: float = 0.05
    device: str = "cpu"
    compile_options: dict = field(default_factory=dict)
    generate_repeats: int = 3
    memory: bool = True
    lr: float = LR


@dataclass
class VariantResult:
    """One cell column of the tables: a variant at one size."""

    name: str
    label: str
    compiled: bool
    status: str  # "ok", "wrong" (disagrees with A: not timed) or "error" (raised: not timed)
    check: CheckResult
    timing: Timing | None = None
    ratio_to: dict[str, Spread] = field(default_factory=dict)
    memory: dict[str, int | None] = field(default_factory=dict)


@dataclass
class SizeResult:
    size: Size
    variants: list[VariantResult]
    recompiles_while_timing: int = 0  # graphs dynamo compiled after the check: should be 0
    floor: Timing | None = None  # the step's GEMMs alone plus one pass over its minimal traffic


@dataclass
class BenchResult:
    machine: dict
    config: dict
    sizes: list[SizeResult]
    graphs: dict[str, GraphReport]
    generate: dict | None
    total_s: float


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _dynamo_graphs() -> int:
    """Graphs dynamo has compiled so far in this process."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _runner(variant: Variant, problem: Problem, lr: float) -> Runner:
    """runner(r): one step on this variant's own parameters and the round's batch."""
    params, batches = problem.copy_params(variant.autograd), problem.batches
    return lambda r: variant.step(params, *batches[r % len(batches)], lr)


def measure_memory(variant: Variant, problem: Problem, device: str, lr: float) -> dict:
    """Peak (allocator; dispatch for eager) and saved bytes of one step on fresh parameters."""
    X, Y = problem.batches[0]

    def fresh():
        params = problem.copy_params(variant.autograd)
        alive = [*params.values(), X, Y]
        exclude = {t.untyped_storage().data_ptr() for t in alive}
        return (lambda: variant.step(params, X, Y, lr)), exclude

    out: dict[str, int | None] = {"peak_allocated_bytes": None, "peak_live_bytes": None}
    out["peak_allocated_bytes"] = memory.peak_allocated_bytes(fresh()[0], device)
    if not variant.compiled:  # compiled code allocates outside the dispatcher
        out["peak_live_bytes"] = memory.peak_live_bytes(fresh()[0])
    step, exclude = fresh()
    saved: tuple[int | None, int | None] = (None, None)  # GC: no autograd graph, no ops' saved
    if variant.autograd:
        saved = memory.autograd_saved_bytes(step, exclude)
    elif not variant.compiled:
        saved = memory.generated_saved_bytes(step, exclude)
    out["saved_bytes"], out["saved_all_bytes"] = saved
    return out


def check_all(variants: list[Variant], problem: Problem, lr: float) -> list[VariantResult]:
    """float64 and float32 checks against A; A must be among the variants."""
    problems = {torch.float64: problem.to(torch.float64), torch.float32: problem}
    refs = reference(problems, next(v for v in variants if v.name == "A"), lr)
    results = []
    for v in variants:
        check = check_variant(v, problems, refs, lr)
        status = "ok" if check.ok else ("error" if check.error else "wrong")
        diffs = ", ".join(f"{k} {d:.1e}" for k, d in check.grad_diff.items())
        log(f"  check {v.name}: {status} ({check.error or diffs})")
        results.append(VariantResult(v.name, v.label, v.compiled, status, check))
    return results


def run_size(size: Size, variants: list[Variant], cfg: BenchConfig) -> SizeResult:
    """Check, then time the variants that agree, then measure their memory."""
    log(f"{size.name}: batch {size.batch}, n_hidden {size.n_hidden}")
    problem = make_problem(size, cfg.device)
    results = check_all(variants, problem, cfg.lr)
    ok = [v for v, r in zip(variants, results) if r.status == "ok"]
    runners = {v.name: _runner(v, problem, cfg.lr) for v in ok}
    runners["F"] = floor_runner(problem)  # timed in the same rounds: the same machine state
    log(f"  timing {', '.join(runners)}: {cfg.rounds} rounds")
    graphs_before = _dynamo_graphs()
    timings = time_interleaved(runners, cfg.rounds, cfg.warmup, cfg.block_s, cfg.device)
    recompiles = _dynamo_graphs() - graphs_before
    if recompiles:
        log(f"  warning: dynamo compiled {recompiles} graph(s) while timing")
    by_name = {r.name: r for r in results}
    for v in ok:
        result = by_name[v.name]
        result.timing = timings[v.name]
        for ref in REFERENCES:
            if ref in timings:
                result.ratio_to[ref] = paired_ratio(timings[v.name], timings[ref])
        if cfg.memory:
            result.memory = measure_memory(v, problem, cfg.device, cfg.lr)
    return SizeResult(size, results, recompiles, timings["F"])


def run(cfg: BenchConfig, extra: list[Variant] | None = None) -> BenchResult:
    """Every size in turn, then the generator's own time; ``extra`` variants join each size."""
    start, cpu_start = time.perf_counter(), cpu_seconds()
    machine = machine_info(cfg.device)
    names = ["A", *[n for n in cfg.variants if n != "A"]]  # A is the check's reference
    graphs = {}
    probe = build_variants(names, cfg.compile_options)
    if any(v.compiled for v in probe):
        import torch._inductor.config as inductor_config

        # compile in this process: a worker pool's CPU time would count as others' load
        inductor_config.compile_threads = 1
    for v in (v for v in probe if v.compiled):
        g = graphs[v.name] = explain(v, make_problem(cfg.sizes[0], cfg.device), cfg.lr)
        log(f"{v.name} under dynamo: {g.graphs} graph(s), {g.breaks} break(s) {g.error or ''}")
    sizes = []
    for size in cfg.sizes:
        torch._dynamo.reset()
        variants = build_variants(names, cfg.compile_options) + list(extra or [])
        sizes.append(run_size(size, variants, cfg))
    generate = None
    if cfg.generate_repeats:
        log(f"make generate: {cfg.generate_repeats} run(s)")
        generate = time_generate(cfg.generate_repeats)
    machine["load_avg_end"] = load_average()
    machine["others_cores"] = others_cores(cpu_start, time.perf_counter() - start)
    config = {**cfg.__dict__, "sizes": [s.__dict__ for s in cfg.sizes], "variants": names}
    return BenchResult(machine, config, sizes, graphs, generate, time.perf_counter() - start)
