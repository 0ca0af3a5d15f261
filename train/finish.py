"""After the last step: final checkpoint, train/val loss, metrics, loss curve and 20 names.

The seed's order: calibrate batchnorm over the whole training set, evaluate with those
statistics, then sample. The test split is left untouched, as in the seed.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from train import loop
from train.device import on_device, to_cpu
from train.model import BatchNormStats, split_loss
from train.report import save_loss_curve, write_metrics
from train.sample import sample_names, sampler_seed


def finish(run: loop.Run, ckpt: Path, out_dir: Path, metrics_file: Path | None) -> bool:
    """Report a finished run; False when its loss is not finite (then nothing is sampled).

    Prints where everything went (checkpoint, metrics, loss curve) before the names.
    """
    final = loop.save(run, ckpt)  # calibrates batchnorm; refuses anything not finite
    stats = BatchNormStats(**final["bn_stats"])
    d, params = on_device(run.data, "cpu"), to_cpu(run.params)  # evaluated where stats are
    train_loss = split_loss(params, stats, d.X_train, d.Y_train)
    val_loss = split_loss(params, stats, d.X_val, d.Y_val)
    print(f"train loss {train_loss:.4f}\nval loss   {val_loss:.4f}")
    metrics = run_metrics(run, train_loss, val_loss)
    metrics_paths = [out_dir / "metrics.json"] + ([metrics_file] if metrics_file else [])
    for path in metrics_paths:
        write_metrics(path, metrics)
    print(f"checkpoint {ckpt}\nmetrics    {', '.join(map(str, metrics_paths))}")
    print(save_loss_curve(run.losses, out_dir / "loss.png"))
    if not math.isfinite(train_loss + val_loss):
        print("error: the trained model's loss is not finite: training diverged.", file=sys.stderr)
        return False
    g = torch.Generator().manual_seed(sampler_seed(run.config.seed))
    names = sample_names(params, stats, d.chars, run.config.block_size, 20, g)
    print("samples:\n" + "\n".join(names))
    return True


def run_metrics(run: loop.Run, train_loss: float, val_loss: float) -> dict:
    """The run's options and results; seconds and steps/s cover the training steps only."""
    return {
        **run.config.as_dict(),
        "steps": run.step,
        "train_loss": finite_or_none(train_loss),
        "val_loss": finite_or_none(val_loss),
        "seconds": run.seconds,
        "steps_per_s": run.step / run.seconds if run.seconds > 0 else None,
        "last_batch_loss": run.losses[-1] if run.losses else None,
        "n_params": sum(p.numel() for p in run.params.values()),
        "data_sha256": run.data.sha256,
        "torch": torch.__version__,
    }


def finite_or_none(x: float) -> float | None:
    """JSON has no NaN or infinity; a diverged loss is written as null."""
    return x if math.isfinite(x) else None
