"""After the last step (rank 0): final checkpoint, train/val/test loss, metrics, loss curve,
20 names.

The test split is evaluated here, unlike the MLP's run: the GPT's test loss is what the
issue compares with the MLP's, over the same test words (``train.gpt.data``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from train.distributed import World
from train.finish import finite_or_none
from train.gpt import loop
from train.gpt.model import sample_names, split_loss
from train.report import save_loss_curve, write_metrics
from train.sample import sampler_seed


def finish(run: loop.Run, ckpt: Path, out_dir: Path, metrics_extra: list[Path]) -> bool:
    """Report a finished run; False when its loss is not finite (then nothing is sampled)."""
    loop.save(run, ckpt, World())  # refuses anything not finite
    d, c = run.data, run.config
    device = run.params["wte"].device
    losses = {
        split: split_loss(run.params, X.to(device), Y.to(device), c)
        for split, X, Y in (
            ("train", d.X_train, d.Y_train),
            ("val", d.X_val, d.Y_val),
            ("test", d.X_test, d.Y_test),
        )
    }
    print("\n".join(f"{split + ' loss':<10} {loss:.4f}" for split, loss in losses.items()))
    metrics = {
        **c.as_dict(),
        "model": loop.MODEL,
        "steps": run.step,
        **{f"{split}_loss": finite_or_none(loss) for split, loss in losses.items()},
        "seconds": run.seconds,
        "steps_per_s": run.step / run.seconds if run.seconds > 0 else None,
        "last_batch_loss": run.losses[-1] if run.losses else None,
        "n_params": sum(p.numel() for p in run.params.values()),
        "block_size": d.block_size,
        "data_sha256": d.sha256,
        "torch": torch.__version__,
    }
    paths = [out_dir / "metrics.json", *metrics_extra]
    for path in paths:
        write_metrics(path, metrics)
    print(f"checkpoint {ckpt}\nmetrics    {', '.join(map(str, paths))}")
    print(save_loss_curve(run.losses, out_dir / "loss.png"))
    if not all(math.isfinite(x) for x in losses.values()):
        print("error: the trained model's loss is not finite: training diverged.", file=sys.stderr)
        return False
    g = torch.Generator().manual_seed(sampler_seed(c.seed))
    names = sample_names(run.params, c, d.chars, d.block_size, 20, g)
    print("samples:\n" + "\n".join(names))
    return True
