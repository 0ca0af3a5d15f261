"""What a classifier run leaves beside its checkpoint: metrics.json (rewritten at every monitor
record, so a running or interrupted run can be read) and monitor.png; the final test.

The test split is evaluated once, at the end; validation is what the run watches on the way.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from train.classifier import loop
from train.classifier.model import Evaluation, evaluate
from train.classifier.plot import save_monitor_figure
from train.report import write_metrics


def run_metrics(run: loop.Run, final: dict[str, Evaluation] | None = None) -> dict:
    """The run's options, data, speed, monitor history and (when done) final results."""
    metrics = {
        **run.config.as_dict(),
        "model": loop.MODEL,
        "data": run.data.name,
        "data_source": run.data.source,
        "data_sha256": run.data.sha256,
        "steps_done": run.step,
        "seconds": run.seconds,
        "steps_per_s": run.step / run.seconds if run.seconds > 0 else None,
        "n_params": sum(p.numel() for p in run.params.values()),
        "torch": torch.__version__,
        "history": run.history,
    }
    for split, result in (final or {}).items():
        metrics[f"{split}_loss"] = finite_or_none(result.loss)
        metrics[f"{split}_acc"] = result.accuracy
    if final:
        metrics["final_batch_loss"] = run.losses[-1]
    return metrics


def finite_or_none(x: float) -> float | None:
    """JSON has no NaN or infinity; a diverged loss is written as null."""
    return x if math.isfinite(x) else None


def write_progress(run: loop.Run, out_dir: Path, metrics_file: Path | None) -> None:
    """Rewrite the metrics file(s) with the history so far (atomically)."""
    metrics = run_metrics(run)
    for path in [out_dir / "metrics.json"] + ([metrics_file] if metrics_file else []):
        write_metrics(path, metrics)


def summary(run: loop.Run, final: dict[str, Evaluation]) -> list[str]:
    """The text panel of monitor.png: what ran and what came out."""
    c = run.config
    lines = [
        f"data      {run.data.name} ({len(run.data.Y_train):,} train)",
        f"network   {' -> '.join(str(n) for n in [run.data.n_features, *c.hidden, 10])}",
        f"optimizer {c.optimizer} lr {c.lr:g} (/10 at {c.steps // 2:,})",
        f"          momentum {c.momentum:g}, weight decay {c.weight_decay:g}",
        f"clip      {c.clip_grad_norm:g}" if c.clip_grad_norm else "clip      none",
        f"steps     {run.step:,} of batch {c.batch_size}, {c.dtype}",
        f"backward  {c.backward}",
        "",
    ]
    for split, result in final.items():
        lines.append(f"{split:<6}loss {result.loss:.4f}  accuracy {100 * result.accuracy:.2f}%")
    if run.seconds > 0:
        lines.append(f"\n{run.step / run.seconds:,.0f} steps/s (the steps alone)")
    return lines


def finish(
    run: loop.Run, ckpt: Path, out_dir: Path, metrics_file: Path | None, figure: bool = True
) -> bool:
    """Final checkpoint, train/val/test results, metrics and figure; False if not finite."""
    loop.save(run, ckpt)  # refuses non-finite parameters
    d = run.data
    final = {
        "train": evaluate(run.params, d.X_train, d.Y_train),
        "val": evaluate(run.params, d.X_val, d.Y_val),
        "test": evaluate(run.params, d.X_test, d.Y_test),
    }
    for split, result in final.items():
        print(f"{split:<5} loss {result.loss:.4f}  accuracy {100 * result.accuracy:.2f}%")
    metrics = run_metrics(run, final)
    paths = [out_dir / "metrics.json"] + ([metrics_file] if metrics_file else [])
    for path in paths:
        write_metrics(path, metrics)
    print(f"checkpoint {ckpt}\nmetrics    {', '.join(map(str, paths))}")
    if figure:
        png = out_dir / "monitor.png"
        print(save_monitor_figure(run.history, summary(run, final), png, final["test"].accuracy))
    if not all(math.isfinite(r.loss) for r in final.values()):
        print("error: the trained model's loss is not finite: training diverged.", file=sys.stderr)
        return False
    return True
