"""What a run leaves behind besides the checkpoint: the loss curve (PNG) and metrics (JSON)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

CURVE_WINDOW = 1000  # the seed plots log10 loss averaged over windows of 1000 steps


def windowed_log10(losses: list[float], window: int) -> list[float]:
    """Mean of log10(loss) over consecutive full windows; a partial last window is dropped."""
    logs = [math.log10(max(x, 1e-30)) for x in losses]  # a loss of exactly 0 has no log
    return [sum(logs[i : i + window]) / window for i in range(0, len(logs) - window + 1, window)]


def save_loss_curve(losses: list[float], path: Path) -> str:
    """Plot the windowed log10 loss to ``path``; returns a one-line note of what happened.

    Short runs (under 10 windows) use smaller windows so the plot still shows a curve.
    matplotlib is optional: without it the plot is skipped, never the run.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed, works over ssh and in CI
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed; skipped the loss curve"
    window = min(CURVE_WINDOW, max(1, len(losses) // 10))
    points = windowed_log10(losses, window)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([window * (i + 1) for i in range(len(points))], points)
    ax.set_xlabel("step")
    ax.set_ylabel("log10 loss")
    ax.set_title(f"training loss, mean of log10 over windows of {window} steps")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = Path(path).with_name(Path(path).name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return f"loss curve: {path}"


def write_metrics(path: Path, metrics: dict) -> None:
    """JSON with sorted keys, written atomically like the checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
