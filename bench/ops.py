"""``python -m bench.ops``: the peers side by side, one forward and backward per row, one process.

Rows are issue 27's table (``bench.op_cases``): the GPT step at two sizes, causal attention at
two sizes, layernorm, GELU-tanh, batchnorm (n-1), softmax cross-entropy, softmax, log_softmax
and the MLP step at three sizes. Columns are ratios to **A**, autograd through the decomposed
forward: the fused torch op, autograd compiled, generated eager, generated compiled, JAX jit and
tensorgrad (``bench.op_run``), then the peak memory of G against A's. Every variant is checked
against A in float64 first; a WRONG one is reported and not timed. ``--threads N`` gives torch
and JAX the same N cores (``bench.machine.pin_threads``); the JAX and tensorgrad columns are left
out, with a note, where this python cannot import them (neither is a dependency of backgen).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import gc
import json
import sys
import time
from pathlib import Path

import torch

from bench.machine import (
    cpu_seconds,
    header_line,
    load_average,
    machine_info,
    others_cores,
    pin_threads,
)
from bench.op_cases import cases
from bench.op_run import COMPILED, VARIANTS, OpsConfig, Outcome, RowResult, run_row
from bench.outputs import claim, write

COLUMNS = [name for name in VARIANTS if name != "A"]


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _options(text: str) -> dict[str, object]:
    """``cpp_wrapper=true,freezing=false`` as torch.compile's ``options`` (values read as python
    literals where they are one: true/false as booleans, numbers as numbers)."""
    out: dict[str, object] = {}
    for part in _csv(text):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise argparse.ArgumentTypeError(f"'{part}' is not KEY=VALUE")
        word = {"true": "True", "false": "False"}.get(value.strip().lower(), value.strip())
        try:
            out[key.strip()] = ast.literal_eval(word)
        except (ValueError, SyntaxError):
            out[key.strip()] = value.strip()
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    keys = [c.key for c in cases(tiny=True)]
    parser = argparse.ArgumentParser(
        prog="python -m bench.ops", description=__doc__.splitlines()[0]
    )
    add = parser.add_argument
    add("--rows", type=_csv, help=f"comma list of {', '.join(keys)} (default: all)")
    add("--variants", type=_csv, help=f"comma list of {', '.join(VARIANTS)} (A always runs)")
    add("--rounds", type=int, default=9, help="timed rounds per row (9)")
    add("--block-s", type=float, default=0.1, help="seconds each variant runs per round (0.1)")
    add("--threads", type=int, help="pin torch and JAX to this many cores (default: unpinned)")
    add("--device", default="cpu", choices=("cpu", "cuda"))
    add("--no-compile", action="store_true", help="leave out AC and GC (no torch.compile)")
    add("--compile-mode", help="torch.compile mode for AC and GC alike (default: torch's)")
    add(
        "--compile-options",
        type=_options,
        help="Inductor options for AC and GC alike, a comma list of KEY=VALUE (cpp_wrapper=true: "
        "the compiled graph's wrapper in C++, not python); not with --compile-mode",
    )
    add("--no-jax", action="store_true", help="leave out J even where JAX is installed")
    add("--no-tensorgrad", action="store_true", help="leave out T even where it is installed")
    add("--no-memory", action="store_true", help="measure no peak memory")
    add("--tiny", action="store_true", help="every row at a tiny size (tests, smoke runs)")
    add("--out", type=Path, default=Path("runs/bench"), help="folder for ops.md and ops.json")
    return parser.parse_args(argv)


def _jax(args: argparse.Namespace, names: list[str]) -> tuple[object | None, str]:
    """(bench.jax_peer or None, the report's line on JAX); imported after pinning."""
    if "J" not in names or args.no_jax:
        return None, "J not asked for"
    try:
        from bench import jax_peer
    except ImportError as exc:
        return None, f"J column skipped: this python cannot import JAX ({exc})"
    return jax_peer, jax_peer.version()


def _tensorgrad(args: argparse.Namespace, names: list[str]) -> tuple[object | None, str]:
    """(bench.tensorgrad_peer or None, the report's line on tensorgrad)."""
    if "T" not in names or args.no_tensorgrad:
        return None, "T not asked for"
    try:
        from bench import tensorgrad_peer
    except ImportError as exc:
        return None, f"T column skipped: this python cannot import tensorgrad ({exc})"
    return tensorgrad_peer, tensorgrad_peer.version()


def _ratio(o: Outcome) -> str:
    if o.status == "ok":
        r = o.ratio
        return f"{r.median:.2f} ({r.q1:.2f}-{r.q3:.2f})" if r else "ok"
    if o.status == "wrong":
        dtype, diff = list(o.diff.items())[-1]
        return f"WRONG ({dtype} diff {diff:.1e})"
    if o.status == "error":
        return f"ERROR ({o.note.replace('|', '/')})"
    return f"skipped ({o.note})"


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _memory(row: RowResult) -> str:
    a, g = row.outcomes["A"].peak_bytes, row.outcomes.get("G", Outcome("skipped")).peak_bytes
    if a is None or g is None:
        return "n/a"
    return f"{_bytes(g)} / {_bytes(a)} = {g / a:.2f}" if a else f"{_bytes(g)} / 0 B"


def _table(rows: list[RowResult]) -> list[str]:
    extra = list(dict.fromkeys(n for r in rows for n in r.outcomes if n not in VARIANTS))
    columns = [*COLUMNS, *extra]
    head = ["fwd+bwd, ratio to A", "A ms", *(VARIANTS.get(n, n) for n in columns), "peak G / A"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        a = row.outcomes["A"]
        cells = [
            row.title,
            (f"{a.ms:.0f}" if a.ms >= 100 else f"{a.ms:.3g}") if a.ms else _ratio(a),
        ]
        for name in columns:
            o = row.outcomes.get(name, Outcome("skipped", "not asked for"))
            label = f"{row.fused_label} " if name == "F" and o.status == "ok" else ""
            cells.append(label + _ratio(o))
        lines.append("| " + " | ".join([*cells, _memory(row)]) + " |")
    return lines


def _check_table(rows: list[RowResult]) -> list[str]:
    names = list(dict.fromkeys(n for r in rows for n in r.outcomes if n != "A"))
    lines = ["| row | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for row in rows:
        cells = []
        for name in names:
            o = row.outcomes.get(name)
            diffs = " / ".join(f"{d:.0e}" for d in o.diff.values()) if o and o.diff else "-"
            cells.append(diffs if not o or o.status != "error" else "ERROR")
        lines.append(f"| {row.title} | " + " | ".join(cells) + " |")
    return lines


def markdown(rows: list[RowResult], info: dict) -> str:
    """The ratio table, the check table, and what a reader needs to weigh them."""
    shared = ", ".join(f"{r.key} {sum(m.shared for m in r.rounds)}/{len(r.rounds)}" for r in rows)
    loads = [m.load_avg for r in rows for m in r.rounds] or [float("nan")]
    return "\n".join(
        [
            "## backgen bench.ops: forward + backward, ratio to autograd on decomposed torch ops",
            "",
            f"Machine: {header_line(info['machine'])}.",
            f"Threads: {info['threads']}. JAX: {info['jax']}. tensorgrad: {info['tensorgrad']}.",
            f"Compiled (AC, GC): {info['compile']}.",
            f"{info['rounds']} rounds per row, the order rotated each round, blocks of "
            f"~{info['block_s'] * 1e3:.0f} ms; a cell is the median per-round ratio to A "
            "(quartiles); below 1 is faster. Every variant was checked against A in float64 and "
            "float32 first (WRONG: disagrees, not timed); timed in float32.",
            "",
            *_table(rows),
            "",
            "Peak: allocator bytes above the start of one forward and backward (CPU profiler "
            "events or CUDA statistics). The MLP step's roofline floor is `python -m bench`'s F "
            "(bench/floor.py), which `make bench` prints before this table.",
            f"Load average (1 min) over the rounds {min(loads):.2f}-{max(loads):.2f}; rounds in "
            f"which a block got less than 0.9 of a core (shared with other processes): {shared}.",
            "",
            "### Check: max relative difference from A (float64 / float32)",
            "",
            *_check_table(rows),
            "",
            f"Total {info['total_s']:.0f} s.",
        ]
    )


def _config(args: argparse.Namespace, jax_peer, tensorgrad_peer) -> tuple[list[str], OpsConfig]:
    """A first, then the variants asked for; those that cannot run here get a skip note."""
    names = ["A", *[n for n in (args.variants or VARIANTS) if n != "A"]]
    if unknown := [n for n in names if n not in VARIANTS]:
        raise ValueError(f"unknown variant(s) {unknown}: choose from {', '.join(VARIANTS)}")
    skip = {} if jax_peer is not None else {"J": "no JAX: see the header"}
    if tensorgrad_peer is None:
        skip["T"] = "no tensorgrad: see the header"
    if args.no_compile:
        skip |= {n: "--no-compile" for n in COMPILED}
    if args.compile_mode and args.compile_options:
        raise ValueError(
            "--compile-mode and --compile-options: torch.compile takes one or the other"
        )
    options = {"mode": args.compile_mode} if args.compile_mode else {}
    if args.compile_options:
        options = {"options": args.compile_options}
    cfg = OpsConfig(args.rounds, args.block_s, args.device, options, not args.no_memory, skip)
    return names, cfg


def _compile_note(cfg: OpsConfig) -> str:
    """How AC and GC were compiled, for the report's header."""
    if all(n in cfg.skip_notes for n in COMPILED):
        return "not run"
    given = ", ".join(f"{k}={v!r}" for k, v in cfg.compile_options.items())
    return f"torch.compile(dynamic=False{', ' + given if given else ''})"


def _threads(args: argparse.Namespace) -> str:
    """Pin before JAX is imported; say what was done."""
    if args.threads:
        return pin_threads(args.threads)
    return f"torch's default ({torch.get_num_threads()} threads), unpinned; JAX unpinned"


def main(argv: list[str] | None = None, extra: dict | None = None) -> int:
    """Run every row; print the markdown, write ops.md and ops.json; 2 on bad options.

    ``extra``: more variants (name -> make(case) -> Prepare) in every row, for tests.
    """
    args = parse_args(argv)
    start, cpu_start, threads = time.perf_counter(), cpu_seconds(), _threads(args)
    jax_peer, jax_note = _jax(args, args.variants or list(VARIANTS))
    tensorgrad_peer, tensorgrad_note = _tensorgrad(args, args.variants or list(VARIANTS))
    try:
        names, cfg = _config(args, jax_peer, tensorgrad_peer)
        chosen = [c for c in cases(args.tiny) if not args.rows or c.key in args.rows]
        if unknown := sorted(set(args.rows or ()) - {c.key for c in chosen}):
            raise ValueError(f"unknown row(s) {unknown}: see --help")
        claim(args.out / "ops.md", args.out / "ops.json")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if any(n in COMPILED and n not in cfg.skip_notes for n in names):
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1  # a worker pool's CPU time would be others' load
    gc.collect()
    gc.freeze()  # what is alive now (modules, sympy's caches) is never garbage: scan it no more
    info = {"machine": machine_info(args.device), "threads": threads, "jax": jax_note}
    info["tensorgrad"] = tensorgrad_note
    info["compile"] = _compile_note(cfg)
    info |= {"rounds": args.rounds, "block_s": args.block_s}
    rows, timed = [], ", ".join(n for n in names if n not in cfg.skip_notes)
    try:
        for case in chosen:
            print(f"[bench.ops] {case.title}: check, then time {timed}", file=sys.stderr)
            rows.append(run_row(case, names, jax_peer, cfg, extra, tensorgrad_peer))
    finally:
        gc.unfreeze()
    info["total_s"] = time.perf_counter() - start
    info["machine"]["load_avg_end"] = load_average()
    info["machine"]["others_cores"] = others_cores(cpu_start, info["total_s"])
    text = markdown(rows, info)
    print(text)
    data = {"info": info, "rows": [dataclasses.asdict(r) for r in rows]}
    write(args.out / "ops.md", text + "\n")
    write(args.out / "ops.json", json.dumps(data, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
