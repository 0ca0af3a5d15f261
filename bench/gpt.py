"""``python -m bench.gpt``: one training step of makemore's GPT, generated against autograd.

The step is ``train.models.gpt``'s, the same function the training loop runs (it lives once):
forward, backward (the generated modules chained by hand, or ``loss.backward()``), then one
plain SGD update shared by every variant, so only forward and backward differ. **A** autograd
eager, **G** generated eager, **GC** G under ``torch.compile``, **AC** A under
``torch.compile``. G's and GC's gradients are checked against A's first (float64 for G, float32
for the compiled ones); one that disagrees is reported WRONG and not timed. Timing interleaves
the variants round by round (``bench.timing``); a cell is the median per-round ratio to A with
its quartiles, and the milliseconds of the median round.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.machine import header_line, machine_info
from bench.outputs import OutputError, claim, write
from bench.timing import paired_ratio, time_interleaved
from train.models.gpt import GPTConfig, autograd_step, generated_step
from train.models.gpt_net import Params, Shape, init_params

LR = 0.01
SEED = 3407


@dataclass(frozen=True)
class GPTSize:
    name: str
    batch: int
    block: int
    n_embd: int
    n_layer: int = 4
    n_head: int = 4
    vocab: int = 27


SIZES = {s.name: s for s in (GPTSize("makemore", 32, 16, 64), GPTSize("large", 64, 64, 256))}
VARIANTS = {
    "A": "autograd, eager",
    "G": "generated, eager",
    "GC": "generated, torch.compile",
    "AC": "autograd, torch.compile",
}
STEPS = {"A": autograd_step, "G": generated_step, "GC": generated_step, "AC": autograd_step}


def make_step(name: str, config: GPTConfig):
    """One SGD step of variant ``name``: loss and gradients by its backward, then the update."""
    loss_and_grads = STEPS[name]

    def step(params: Params, X: torch.Tensor, Y: torch.Tensor, weight: torch.Tensor):
        loss, grads = loss_and_grads(params, X, Y, weight, config=config)
        with torch.no_grad():
            torch._foreach_add_(list(params.values()), [grads[k] for k in params], alpha=-LR)
        return loss

    return torch.compile(step, dynamic=False) if name.endswith("C") else step


def problem(size: GPTSize, dtype: torch.dtype, device: str) -> tuple[GPTConfig, Params, list]:
    """makemore's init at ``size`` and four random batches (a quarter of each padded)."""
    config = GPTConfig(n_layer=size.n_layer, n_head=size.n_head, n_embd=size.n_embd)
    g = torch.Generator().manual_seed(SEED)
    shape = Shape(size.vocab, size.block, size.n_layer, size.n_head, size.n_embd)
    params = {k: v.to(device) for k, v in init_params(shape, g, dtype).items()}
    batches = []
    for _ in range(4):
        X = torch.randint(0, size.vocab, (size.batch, size.block), generator=g)
        Y = torch.randint(0, size.vocab, (size.batch, size.block), generator=g)
        Y[:, -size.block // 4 :] = -1
        batches.append((X.to(device), Y.to(device)))
    return config, params, batches


def check(name: str, size: GPTSize, device: str) -> float:
    """Largest |update - A's update| / largest |A's update| after one step from the same start."""
    dtype = torch.float32 if name.endswith("C") else torch.float64
    config, params, batches = problem(size, dtype, device)
    one = torch.ones((), dtype=dtype, device=device)
    start = {k: v.clone() for k, v in params.items()}
    make_step("A", config)(start, *batches[0], one)
    mine = {k: v.clone() for k, v in params.items()}
    make_step(name, config)(mine, *batches[0], one)
    ref = {k: start[k] - params[k] for k in params}
    got = {k: mine[k] - params[k] for k in params}
    scale = max(r.abs().max().item() for r in ref.values())
    return max((got[k] - ref[k]).abs().max().item() for k in params) / scale


def bench_size(size: GPTSize, names: list[str], rounds: int, device: str, block_s: float) -> dict:
    tolerance = {"G": 1e-10, "GC": 1e-3, "AC": 1e-3}
    rows: dict[str, dict] = {"A": {"check": 0.0}}
    for name in names:
        if name != "A":
            err = check(name, size, device)
            rows[name] = {"check": err, "wrong": err > tolerance[name]}
    config, params, batches = problem(size, torch.float32, device)
    one = torch.ones((), device=device)
    runners = {}
    for name, row in rows.items():
        if row.get("wrong"):
            continue
        step, own = make_step(name, config), {k: v.clone() for k, v in params.items()}
        started = time.perf_counter()
        step(own, *batches[0], one)  # compiles here, not in the timed rounds
        row["first_step_s"] = time.perf_counter() - started
        runners[name] = lambda r, step=step, own=own: step(own, *batches[r % 4], one)
    timings = time_interleaved(runners, rounds, 2, block_s, device)
    for name, timing in timings.items():
        ratio = paired_ratio(timing, timings["A"])
        rows[name].update(
            ms=timing.spread.median * 1e3, ratio=ratio.median, q1=ratio.q1, q3=ratio.q3
        )
    return rows


def markdown(results: dict[str, dict], header: str) -> str:
    names = list(next(iter(results.values())))
    sizes = ", ".join(
        f"{s} (B {SIZES[s].batch}, T {SIZES[s].block}, C {SIZES[s].n_embd})" for s in results
    )
    lines = [f"GPT step: median per-round time ratio to A (quartiles), median ms per step; {sizes}"]
    lines += [header, ""]
    lines.append("| variant | " + " | ".join(results) + " |")
    lines.append("|---" * (len(results) + 1) + "|")
    for name in names:
        cells = []
        for rows in results.values():
            row = rows[name]
            if row.get("wrong"):
                cells.append(f"WRONG ({row['check']:.1e})")
            else:
                cells.append(
                    f"{row['ratio']:.2f} ({row['q1']:.2f}-{row['q3']:.2f}), " f"{row['ms']:.1f} ms"
                )
        lines.append(f"| {name} {VARIANTS[name]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpt", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="makemore size, A and G, 10 rounds")
    p.add_argument("--sizes", default=None, help=f"comma list of {', '.join(SIZES)}")
    p.add_argument("--variants", default=None, help="comma list of A,G,GC,AC (A always runs)")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--out", type=Path, default=Path("runs/bench"))
    args = p.parse_args(argv)
    for flag, value in (("--rounds", args.rounds), ("--threads", args.threads)):
        if value is not None and value < 1:
            p.error(f"{flag} {value}: at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = (args.sizes or ("makemore" if args.quick else "makemore,large")).split(",")
    names = (args.variants or ("A,G" if args.quick else "A,G,GC,AC")).split(",")
    names = ["A", *[n for n in names if n != "A"]]
    if unknown := [n for n in names if n not in VARIANTS] + [s for s in sizes if s not in SIZES]:
        print(f"error: unknown variant or size {unknown}", file=sys.stderr)
        return 2
    try:
        claim(args.out / "gpt.md", args.out / "gpt.json")
    except OutputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if any(n.endswith("C") for n in names):
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1  # a worker pool's CPU time would be others' load
    rounds = args.rounds or (5 if args.quick else 20)
    results = {}
    try:
        for s in sizes:
            print(f"[bench.gpt] {s}: checking and timing {', '.join(names)}", file=sys.stderr)
            block_s = 0.02 if args.quick else 0.05
            results[s] = bench_size(SIZES[s], names, rounds, args.device, block_s)
    except KeyboardInterrupt:
        print("interrupted: no report written", file=sys.stderr)
        return 130
    text = markdown(results, header_line(machine_info(args.device)))
    print(text)
    write(args.out / "gpt.md", text)
    write(args.out / "gpt.json", json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
