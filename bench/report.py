"""The run as one markdown report (ratios only), a JSON file (everything) and a plot.

Absolute times go to the JSON only: this machine is shared, and a ratio measured round by round
against A survives other load far better than a millisecond figure does.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

from bench.machine import contention_warning, header_line
from bench.outputs import write
from bench.runner import BenchResult, SizeResult, VariantResult
from bench.timing import Spread


def _ratio_cell(result: VariantResult, ref: str) -> str:
    if result.status == "wrong":  # the last dtype checked is the one that failed
        dtype, grad = list(result.check.grad_diff.items())[-1]
        loss = result.check.loss_diff[dtype]
        return f"WRONG ({dtype}: grad diff {grad:.1e}, loss diff {loss:.1e})"
    if result.status == "error":
        return f"ERROR ({_cell_text(result.check.error)})"
    spread = result.ratio_to.get(ref)
    if spread is None:
        return "n/a"
    return f"{spread.median:.2f} ({spread.q1:.2f}-{spread.q3:.2f})"


def _rows(sizes: list[SizeResult]) -> list[tuple[str, str]]:
    """(name, label) of every variant in first-seen order."""
    seen: dict[str, str] = {}
    for size in sizes:
        for v in size.variants:
            seen.setdefault(v.name, v.label)
    return list(seen.items())


def _table(sizes: list[SizeResult], cell) -> list[str]:
    """Rows = variants, columns = sizes; ``cell(VariantResult) -> str``."""
    head = ["variant", *(s.size.name for s in sizes)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for name, label in _rows(sizes):
        cells = []
        for size in sizes:
            found = [v for v in size.variants if v.name == name]
            cells.append(cell(found[0]) if found else "-")
        lines.append(f"| {name}: {label} | " + " | ".join(cells) + " |")
    return lines


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _memory_cell(v: VariantResult) -> str:
    if not v.memory:
        return "-"
    m = v.memory
    return " / ".join(
        _bytes(m.get(k)) for k in ("peak_allocated_bytes", "peak_live_bytes", "saved_bytes")
    )


def _check_cell(v: VariantResult) -> str:
    text = ", ".join(f"{k} {d:.0e}" for k, d in v.check.grad_diff.items())
    return text if v.status != "error" else f"ERROR ({_cell_text(v.check.error)})"


def _cell_text(text: str | None) -> str:
    """An error message made safe for a markdown table cell."""
    return (text or "").replace("|", "/")


def _compile_lines(result: BenchResult) -> list[str]:
    lines = []
    for name, g in result.graphs.items():
        what = g.error or f"{g.graphs} graph(s), {g.breaks} graph break(s)"
        lines.append(f"- {name} under dynamo ({result.sizes[0].size.name}): {what}")
        lines += [f"  - break: {reason}" for reason in g.reasons]
    for size in result.sizes:
        firsts = [
            f"{v.name} {v.check.first_call_s:.1f} s"
            for v in size.variants
            if v.compiled and v.check.first_call_s is not None
        ]
        if firsts:
            lines.append(
                f"- first float32 call at {size.size.name} (the compile; far shorter when "
                f"inductor's on-disk cache already holds the graph): {', '.join(firsts)}"
            )
        if size.recompiles_while_timing:
            lines.append(
                f"- warning: {size.recompiles_while_timing} recompilation(s) while timing at "
                f"{size.size.name}: compile time is inside those rounds"
            )
    return lines


def markdown(result: BenchResult) -> str:
    """The whole report: header, ratio tables, check, memory, compile, generator time."""
    cfg, gen = result.config, result.generate
    out = [
        "## backgen bench: one SGD step of the makemore MLP, float32",
        "",
        f"Machine: {header_line(result.machine)}.",
        *([f"**Warning:** {w}."] if (w := contention_warning(result.machine)) else []),
        f"Rounds: {cfg['rounds']} interleaved after {cfg['warmup']} warm-up; cell = median of the "
        "per-round ratio (quartiles in brackets); below 1 is faster.",
        "",
        "### Step time, ratio to A",
        "",
        *_table(result.sizes, lambda v: _ratio_cell(v, "A")),
        "",
        "### Step time, ratio to B",
        "",
        *_table(result.sizes, lambda v: _ratio_cell(v, "B")),
        "",
        "### Step time, ratio to the floor F",
        "",
        *_table(result.sizes, lambda v: _ratio_cell(v, "F")),
        "",
        "F: the step's six GEMMs timed alone plus one pass over the bytes its element-wise work "
        "must read and write once (bench/floor.py), in the same rounds.",
        "",
        "### Check against A: max |g - g_A| / max |g_A| (float64, float32)",
        "",
        *_table(result.sizes, _check_cell),
        "",
        "### Memory of one step: peak allocated / peak live op outputs / saved for backward",
        "",
        *_table(result.sizes, _memory_cell),
        "",
        "Peaks are bytes above the start of the step (allocator: CPU profiler events or CUDA "
        "stats; live: a dispatch mode, eager only). Saved = unique storages the backward keeps, "
        "parameters and the batch (X, Y) left out on both sides; n/a where no such notion exists.",
        "",
        "### Compilation",
        "",
        *(_compile_lines(result) or ["- no compiled variants"]),
        "",
    ]
    if gen:
        what = f"{gen['median_s']:.2f} s" if "median_s" in gen else f"failed: {gen['error']}"
        out.append(
            f"`make generate` (whole catalogue, into a temp dir): {what}, median of "
            f"{len(gen['seconds'])}."
        )
    out.append(f"\nTotal bench time {result.total_s:.0f} s.")
    return "\n".join(out) + "\n"


def write_json(result: BenchResult, path: Path) -> None:
    """Everything, absolute per-step seconds included."""
    data = dataclasses.asdict(result)
    for size in data["sizes"]:
        for v in size["variants"]:
            if v["timing"]:
                spread = Spread.of(v["timing"]["per_step_s"])
                v["timing"]["seconds_per_step"] = dataclasses.asdict(spread)
    write(path, json.dumps(data, indent=1, default=str) + "\n")


def plot(result: BenchResult, path: Path) -> bool:
    """Bars of the ratio to A per size, quartiles as error bars; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [name for name, _ in _rows(result.sizes)]
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(result.sizes), 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        xs, ys, lo, hi = [], [], [], []
        for j, size in enumerate(result.sizes):
            spread = next((v.ratio_to.get("A") for v in size.variants if v.name == name), None)
            if spread:
                xs.append(j + i * width)
                ys.append(spread.median)
                lo.append(spread.median - spread.q1)
                hi.append(spread.q3 - spread.median)
        ax.bar(xs, ys, width, yerr=[lo, hi], label=name, capsize=2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(result.sizes))])
    ax.set_xticklabels([s.size.name for s in result.sizes])
    ax.set_ylabel("step time / A's")
    ax.legend(ncol=len(names), fontsize="small", loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120)
    plt.close(fig)
    write(path, png.getvalue())
    return True
