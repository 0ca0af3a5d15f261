"""monitor.png: the monitor history in one figure, six panels read left to right, top to bottom.

loss (train batches and validation, log scale) | accuracy (train, validation, test when done) |
gradient norms (total before/after clipping and per layer) | update-to-data ratios per layer
(lr*grad and the step really taken; the -3 rule of thumb) | dead ReLUs per hidden layer |
the run's settings and results.
"""

from __future__ import annotations

import math
from pathlib import Path

from train.report import save_figure


def series(history: list[dict], key: str, index: int | None = None) -> list[float]:
    values = [row[key] if index is None else row[key][index] for row in history]
    return [v if v is not None and math.isfinite(v) else math.nan for v in values]


def draw_curves(axes, history: list[dict], test_acc: float | None) -> None:
    """The five panels of curves."""
    draw_results(axes[0], axes[1], history, test_acc)
    draw_gradients(axes[2], axes[3], axes[4], history)
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)


def draw_results(loss, acc, history: list[dict], test_acc: float | None) -> None:
    """Loss and accuracy, train batches against validation (and the final test accuracy)."""
    steps = [row["step"] for row in history]
    loss.plot(steps, series(history, "train_loss"), label="train (batches)")
    loss.plot(steps, series(history, "val_loss"), label="validation")
    loss.set(title="loss", yscale="log")
    acc.plot(steps, [100 * a for a in series(history, "train_acc")], label="train (batches)")
    acc.plot(steps, [100 * a for a in series(history, "val_acc")], label="validation")
    if test_acc is not None:
        acc.axhline(100 * test_acc, color="k", ls="--", lw=1, label=f"test {100 * test_acc:.2f}%")
    shown = series(history, "train_acc") + series(history, "val_acc") + [test_acc or math.nan]
    lowest = min((a for a in shown if math.isfinite(a)), default=0.0)  # every point in view
    acc.set(title="accuracy (%)", ylim=(max(0.0, lowest * 100 - 5), 100.5))


def draw_gradients(norms, ratios, dead, history: list[dict]) -> None:
    """Gradient norms, update-to-data ratios and dead ReLUs, per layer."""
    steps = [row["step"] for row in history]
    norms.plot(steps, series(history, "grad_norm_before_clip"), color="k", label="total")
    if any(r["grad_norm_after_clip"] != r["grad_norm_before_clip"] for r in history):
        norms.plot(steps, series(history, "grad_norm_after_clip"), "k--", label="total, clipped")
    n_layers = len(history[0]["layer_grad_norm"])
    for i in range(n_layers):
        norms.plot(steps, series(history, "layer_grad_norm", i), lw=1, label=f"layer {i + 1}")
        line = ratios.plot(steps, series(history, "update_ratio", i), lw=1, label=f"layer {i + 1}")
        applied = series(history, "applied_update_ratio", i)
        ratios.plot(steps, applied, "--", lw=1, color=line[0].get_color())
    norms.set(title="gradient norm", yscale="log")
    ratios.plot([], [], "k--", lw=1, label="dashed: |Δparam| applied")
    ratios.axhline(-3, color="k", ls=":", lw=1, label="-3 (rule of thumb)")
    ratios.set(title="update / data per layer, log10 |lr·grad| / |param|")
    for i in range(len(history[0]["dead_relu"])):
        dead.plot(steps, [100 * d for d in series(history, "dead_relu", i)], label=f"ReLU {i + 1}")
    dead.set(title="dead ReLUs (% of units, validation)", ylim=(-1, 101))


def save_monitor_figure(history: list[dict], summary: list[str], path: Path, test_acc=None) -> str:
    """Draw the figure to ``path`` (atomically); a one-line note of what happened."""
    if not history:
        return "no monitor records yet; skipped monitor.png"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed; skipped monitor.png"
    fig, grid = plt.subplots(2, 3, figsize=(15, 8.5))
    axes = list(grid.flat)
    draw_curves(axes[:5], history, test_acc)
    axes[5].axis("off")
    axes[5].text(0, 1, "\n".join(summary), va="top", family="monospace", fontsize=9)
    fig.tight_layout()
    try:
        save_figure(fig, Path(path), dpi=90)
    finally:
        plt.close(fig)
    return f"monitor figure: {path}"
