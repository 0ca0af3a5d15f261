"""What the run watches every K steps, as the seed's GradientMonitor does, and the progress line.

Per layer l (its W and b together):
    grad norm      |g_l| = sqrt(|dW_l|^2 + |db_l|^2), of the raw gradient (before clipping)
    update ratio   log10(|lr * g_l| / |p_l|), g_l as clipped (what the optimizer was fed), p_l
                   before the update: about -3 is healthy; far below, the layer hardly learns;
                   far above, it is being thrown around
    applied ratio  log10(|p_after - p_before| / |p_before|), the step the optimizer really took
and in total the gradient norm before and after clipping, the fraction of dead ReLUs per hidden
layer (units that output 0 on every validation example), the mean batch loss and accuracy since
the last record and the validation loss and accuracy after this step's update.

monitor.png draws the history in one figure, six panels read left to right, top to bottom:
loss (train batches and validation, log scale) | accuracy (train, validation, test when done) |
gradient norms (total before/after clipping and per layer) | update-to-data ratios per layer
(lr*grad and the step really taken; the -3 rule of thumb) | dead ReLUs per hidden layer |
the run's settings and results.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from train.engine import Diverged, apply_update
from train.models.classifier_net import Evaluation, Params, clip, n_layers
from train.progress import Progress
from train.report import finite_or_none, run_metrics, save_figure

if TYPE_CHECKING:
    from train.models.classifier import Run


def layer_norm(tensors: list[torch.Tensor]) -> float:
    return math.sqrt(sum(float(t.double().square().sum()) for t in tensors))


def layer_grad_norms(grads: dict[str, torch.Tensor], n: int) -> list[float]:
    """|g_l| per layer; call before clipping, which scales the gradients in place."""
    return [layer_norm([grads[f"W{i}"], grads[f"b{i}"]]) for i in range(1, n + 1)]


def update_ratios(params: Params, lr: float) -> list[float]:
    """log10(|lr * g_l| / |p_l|) per layer, g_l = ``p.grad`` as fed to the optimizer (clipped)."""
    ratios = []
    for i in range(1, n_layers(params) + 1):
        W, b = params[f"W{i}"], params[f"b{i}"]
        update = lr * layer_norm([W.grad, b.grad])
        data = layer_norm([W, b])
        ratios.append(math.log10(update / data) if update > 0 and data > 0 else -math.inf)
    return ratios


def applied_ratios(before: Params, after: Params) -> list[float]:
    """Per layer log10(|p_after - p_before| / |p_before|): the step the optimizer really took.

    Equal to the lr*grad ratio for plain SGD; for RMSprop and Adam, which divide by a running
    RMS of the gradient, the real step is about lr per weight however small the gradient is.
    """
    ratios = []
    for i in range(1, n_layers(before) + 1):
        names = (f"W{i}", f"b{i}")
        step = layer_norm([after[k].detach() - before[k] for k in names])
        data = layer_norm([before[k] for k in names])
        ratios.append(math.log10(step / data) if step > 0 and data > 0 else -math.inf)
    return ratios


def watched_update(run: Run, grads: dict[str, torch.Tensor], watch: bool) -> tuple:
    """Feed ``grads`` through ``.grad``, clip, step; the norms and, when ``watch``, layer stats.

    Raises ``Diverged`` on a gradient norm that is not finite, before the update.
    """
    lr = run.config.lr_at(run.step)

    def inspect() -> tuple:
        raw = layer_grad_norms(grads, n_layers(run.params)) if watch else []
        norms = clip(list(run.params.values()), run.config.clip_grad_norm)  # scales .grad
        if not math.isfinite(norms[0]):
            raise Diverged(run.step + 1, f"the gradient norm is {norms[0]}")
        if not watch:
            return norms, {}, {}
        before = {k: p.detach().clone() for k, p in run.params.items()}
        return (
            norms,
            {"layer_grad_norm": raw, "update_ratio": update_ratios(run.params, lr)},
            before,
        )

    norms, layers, before = apply_update(run, grads, inspect)
    if watch:
        layers["applied_update_ratio"] = applied_ratios(before, run.params)
    return norms, layers


def watch_record(run: Run, norms: tuple[float, float], layers: dict) -> dict:
    """The monitor row for the step just taken, with the validation split evaluated after it."""
    since = run.history[-1]["step"] if run.history else 0
    val = run.evaluate(run.data.X_val, run.data.Y_val)
    lr = run.config.lr_at(run.step - 1)
    return record(run.step, lr, run.losses[since:], run.accs[since:], norms, layers, val)


def record(
    step: int,
    lr: float,
    batch_losses: list[float],
    batch_accs: list[float],
    norms: tuple[float, float],
    layers: dict[str, list[float]],
    val: Evaluation,
) -> dict:
    """One row of the monitor history (plain floats and lists: JSON and checkpoint alike)."""
    return {
        "step": step,
        "lr": lr,
        "train_loss": sum(batch_losses) / len(batch_losses),
        "train_acc": sum(batch_accs) / len(batch_accs),
        "val_loss": val.loss,
        "val_acc": val.accuracy,
        "dead_relu": list(val.dead),
        "grad_norm_before_clip": norms[0],
        "grad_norm_after_clip": norms[1],
        **layers,
    }


def metrics(run: Run, final: dict[str, Evaluation] | None = None) -> dict:
    """The run's metrics.json: options, data, speed, the history so far and (when done) the
    final results."""
    metrics = {
        **run_metrics(run, run.model),
        "data": run.data.name,
        "data_source": run.data.source,
        "steps_done": run.step,
        "history": run.history,
    }
    for split, result in (final or {}).items():
        metrics[f"{split}_loss"] = finite_or_none(result.loss)
        metrics[f"{split}_acc"] = result.accuracy
    if final:
        metrics["final_batch_loss"] = run.losses[-1]
    return metrics


class ClassifierProgress(Progress):
    """The MLP's progress line with the accuracy added (both: means over recent batches)."""

    def update(self, step: int, loss: float, acc: float = math.nan) -> None:  # type: ignore[override]
        self.show(step, f"loss {loss:.4f} | acc {100 * acc:5.1f}%")


def summary(run: Run, final: dict[str, Evaluation]) -> list[str]:
    """The text panel of monitor.png: what ran and what came out."""
    c = run.config
    lines = [
        f"data      {run.data.name} ({len(run.data.Y_train):,} train)",
        f"network   {run.network()}",
        f"optimizer {c.optimizer} lr {c.lr:g} (/10 at {c.decay_step:,})",
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


# --- monitor.png ---------------------------------------------------------------------------------


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
