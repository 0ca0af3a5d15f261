"""``python -m bench``: check, time and measure every step variant; print one markdown report.

``make bench`` runs it in full (three sizes, every variant); ``make bench-quick`` (``--quick``)
is the smoke run CI can afford: the makemore size, A B G GC, few rounds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from bench.outputs import claim, write
from bench.problem import SIZES, parse_size
from bench.report import markdown, plot, write_json
from bench.runner import BenchConfig, log, run
from bench.variants import VARIANT_NAMES

# Quick: GC is the compiled variant that matters to backgen; AC would add two more compilations
# (about 10 s each with a cold inductor cache on a 2-core machine) to a run meant for CI.
QUICK = {
    "sizes": ["makemore"],
    "variants": ["A", "B", "G", "GC"],
    "rounds": 10,
    "warmup": 2,
    "block_s": 0.02,
    "generate_repeats": 1,
}
FULL = {
    "sizes": list(SIZES),
    "variants": list(VARIANT_NAMES),
    "rounds": 30,
    "warmup": 3,
    "block_s": 0.05,
    "generate_repeats": 3,
}


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="the smoke run: makemore, A B G GC, 10 rounds")
    add("--sizes", type=_csv, help=f"comma list of {', '.join(SIZES)} or BATCHxHIDDEN")
    add("--variants", type=_csv, help=f"comma list of {', '.join(VARIANT_NAMES)} (A always runs)")
    add("--rounds", type=int, help="timed rounds per size (30; quick 10)")
    add("--warmup", type=int, help="untimed interleaved rounds first (3; quick 2)")
    add("--out", type=Path, default=Path("runs/bench"), help="folder for bench.md/.json/.png")
    add("--json", type=Path, help="JSON path (default OUT/bench.json)")
    add("--threads", type=int, help="torch threads (default: torch's own default)")
    add("--device", default="cpu", help="cpu or cuda")
    add("--no-compile", action="store_true", help="leave out the compiled variants (GC, AC)")
    add("--compile-mode", help="torch.compile mode for GC and AC alike (default: torch's)")
    add("--no-generate", action="store_true", help="do not time make generate")
    add("--no-plot", action="store_true", help="write no bench.png")
    return parser.parse_args(argv)


def config_from(args: argparse.Namespace) -> BenchConfig:
    """The quick or full defaults, overridden by whatever was given."""
    base = QUICK if args.quick else FULL
    variants = args.variants or base["variants"]
    unknown = [v for v in variants if v not in VARIANT_NAMES]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}: choose from {', '.join(VARIANT_NAMES)}")
    if args.device not in ("cpu", "cuda"):
        raise ValueError(f"--device {args.device!r} is not a device: choose cpu or cuda")
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out} is a file; --out names a folder")
    if args.json is not None and args.json.is_dir():
        raise ValueError(f"--json {args.json} is a folder; --json names a file")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda, but torch sees no CUDA device")
    for flag, value, least in (("rounds", args.rounds, 1), ("warmup", args.warmup, 0)):
        if value is not None and value < least:
            raise ValueError(f"--{flag} {value}: at least {least}")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads {args.threads}: at least 1")
    if args.no_compile:
        variants = [v for v in variants if v not in ("GC", "AC")]
    return BenchConfig(
        sizes=[parse_size(s) for s in (args.sizes or base["sizes"])],
        variants=variants,
        rounds=args.rounds or base["rounds"],
        warmup=base["warmup"] if args.warmup is None else args.warmup,
        block_s=base["block_s"],
        device=args.device,
        compile_options={"mode": args.compile_mode} if args.compile_mode else {},
        generate_repeats=0 if args.no_generate else base["generate_repeats"],
    )


def main(argv: list[str] | None = None) -> int:
    """Run, print the markdown, write bench.md, the JSON and the plot; 2 on bad options."""
    args = parse_args(argv)
    json_path = args.json or args.out / "bench.json"
    png = args.out / "bench.png"
    try:
        cfg = config_from(args)
        claim(args.out / "bench.md", json_path, *([] if args.no_plot else [png]))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    log(f"threads: {torch.get_num_threads()}")
    try:
        result = run(cfg)
    except KeyboardInterrupt:
        print("interrupted: no report written", file=sys.stderr)
        return 130
    text = markdown(result)
    print(text)
    write(args.out / "bench.md", text)
    write_json(result, json_path)
    plotted = not args.no_plot and plot(result, png)
    log(f"wrote {args.out / 'bench.md'}, {json_path}{f', {png}' if plotted else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
