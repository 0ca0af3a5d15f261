"""What a run leaves behind besides the checkpoint: metrics (JSON), the loss curve (PNG), and
what the end of a run prints.

Every model's metrics hold its options and ``run_metrics``'s speed, size and data; the MLP and
the GPT end alike (``end_with_names``: split losses, metrics, loss curve, 20 sampled names), the
classifier with accuracies and its monitor figure (``train.models.classifier``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from train.checkpoint import new_file_mode
from train.config import sampler_seed

if TYPE_CHECKING:
    from train.engine import Job, RunState

CURVE_WINDOW = 1000  # the seed plots log10 loss averaged over windows of 1000 steps


def windowed_log10(losses: list[float], window: int) -> list[float]:
    """Mean of log10(loss) over consecutive full windows; a partial last window is dropped."""
    logs = [math.log10(max(x, 1e-30)) for x in losses]  # a loss of exactly 0 has no log
    return [sum(logs[i : i + window]) / window for i in range(0, len(logs) - window + 1, window)]


def curve_window(n_losses: int) -> int:
    """The seed's 1000-step windows; short runs (under 10 windows) use smaller ones."""
    return min(CURVE_WINDOW, max(1, n_losses // 10))


def plot_losses(losses: list[float]):  # -> matplotlib Figure; matplotlib is imported lazily
    """The windowed log10 loss curve; the y label says how to read the log scale back."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, works over ssh and in CI
    import matplotlib.pyplot as plt

    window = curve_window(len(losses))
    points = windowed_log10(losses, window)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([window * (i + 1) for i in range(len(points))], points)
    ax.set_xlabel("step")
    ax.set_ylabel("log10(loss): 0.5 is a loss of 3.2, 0.3 of 2.0")
    ax.set_title(f"training loss: mean of log10(minibatch loss) over windows of {window} steps")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def save_loss_curve(losses: list[float], path: Path) -> str:
    """Plot the windowed log10 loss to ``path``; returns a one-line note of what happened.

    matplotlib is optional: without it the plot is skipped, never the run.
    """
    try:
        import matplotlib.pyplot as plt

        fig = plot_losses(losses)
    except ImportError:
        return "matplotlib is not installed; skipped the loss curve"
    try:
        save_figure(fig, Path(path), dpi=100)
    finally:
        plt.close(fig)
    window = curve_window(len(losses))
    return f"loss curve {path} (log10 of the loss, mean over windows of {window} steps)"


def save_figure(fig, path: Path, dpi: int) -> None:
    """A PNG carrying the run's mark (``preflight.PNG_MARK``: a later run may replace it, a
    user's own PNG of the same name never), written atomically."""
    from train.preflight import PNG_MARK

    metadata = {PNG_MARK: "written by a training run (python -m train)"}
    replace_atomically(path, lambda f: fig.savefig(f, format="png", dpi=dpi, metadata=metadata))


def replace_atomically(path: Path, write, mode: str = "wb") -> None:
    """``write(f)`` into a fresh temporary file beside ``path``, then move it over ``path``: a
    crash, a full disk or Ctrl-C leaves the old file and no temporary one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, new_file_mode(path))  # mkstemp's 0600 would hide the file from others
        with os.fdopen(fd, mode) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_metrics(path: Path, metrics: dict) -> None:
    """JSON with sorted keys, written atomically like the checkpoint."""
    text = json.dumps(metrics, indent=2, sort_keys=True) + "\n"
    replace_atomically(path, lambda f: f.write(text), mode="w")


def finite_or_none(x: float) -> float | None:
    """JSON has no NaN or infinity; a diverged loss is written as null."""
    return x if math.isfinite(x) else None


def run_metrics(run: RunState, tag: str | None) -> dict:
    """What every model's metrics hold: its options, its checkpoint's ``model`` field (``tag``,
    None for the MLP's), size, data and speed (seconds and steps/s: the training steps only)."""
    return {
        **run.config.as_dict(),
        **({"model": tag} if tag else {}),
        "seconds": run.seconds,
        "steps_per_s": run.step / run.seconds if run.seconds > 0 else None,
        "n_params": sum(p.numel() for p in run.params.values()),
        "data_sha256": run.data.sha256,
        "torch": torch.__version__,
    }


def write_all(job: Job, metrics: dict) -> None:
    """The metrics into the run's metrics.json and ``--metrics``'s file."""
    for path in job.metrics_paths:
        write_metrics(path, metrics)


def say_files(job: Job) -> None:
    """Where the checkpoint and the metrics went."""
    print(f"checkpoint {job.ckpt}\nmetrics    {', '.join(map(str, job.metrics_paths))}")


def all_finite(losses: Iterable[float]) -> bool:
    """False, saying so, when a trained model's loss is not finite."""
    if all(math.isfinite(x) for x in losses):
        return True
    print("error: the trained model's loss is not finite: training diverged.", file=sys.stderr)
    return False


def end_with_names(
    run: RunState,
    job: Job,
    tag: str | None,
    losses: dict[str, float],
    sample: Callable[[int, torch.Generator], list[str]],
    **extra: object,
) -> bool:
    """The MLP's and the GPT's end: each split's loss, the metrics (with ``extra``), the loss
    curve, and 20 names drawn by ``sample(count, generator)`` (the seed's sampler seed); False
    when a loss is not finite (then nothing is sampled)."""
    print("\n".join(f"{split + ' loss':<10} {loss:.4f}" for split, loss in losses.items()))
    metrics = {
        **run_metrics(run, tag),
        "steps": run.step,
        **{f"{split}_loss": finite_or_none(loss) for split, loss in losses.items()},
        "last_batch_loss": run.losses[-1] if run.losses else None,
        **extra,
    }
    write_all(job, metrics)
    say_files(job)
    print(save_loss_curve(run.losses, job.out / "loss.png"))
    if not all_finite(losses.values()):
        return False
    g = torch.Generator().manual_seed(sampler_seed(run.config.seed))
    print("samples:\n" + "\n".join(sample(20, g)))
    return True
