"""Sampling names from a trained model, one character at a time, as the seed does."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from train.data import load_dataset
from train.model import BatchNormStats, Params, calibrate, logits_eval

# An undertrained model may rarely pick '.', so cap a name's length rather than loop forever.
MAX_NAME_LENGTH = 100
SAMPLE_SEED_OFFSET = 10  # the seed samples from a generator seeded 2147483647 + 10
SEED_LIMIT = 2**64  # torch generators take seeds in [0, 2**64)


def sampler_seed(seed: int) -> int:
    """The run's seed + 10, as the seed does, wrapped so any 64-bit --seed stays a valid seed."""
    return (seed + SAMPLE_SEED_OFFSET) % SEED_LIMIT


class SamplingError(Exception):
    """The model cannot be sampled (its probabilities are not finite: a diverged run)."""


def sample_names(
    params: Params,
    stats: BatchNormStats,
    chars: str,
    block_size: int,
    count: int,
    g: torch.Generator,
) -> list[str]:
    """``count`` names; each starts from an all-'.' context and ends when '.' is drawn."""
    names = []
    for _ in range(count):
        out: list[int] = []
        context = [0] * block_size
        while len(out) < MAX_NAME_LENGTH:
            logits = logits_eval(params, stats, torch.tensor([context]))
            probs = F.softmax(logits, dim=1)
            if not torch.isfinite(probs).all():
                raise SamplingError("the model's probabilities are not finite (diverged run?)")
            ix = torch.multinomial(probs, num_samples=1, generator=g).item()
            if ix == 0:
                break
            out.append(ix)
            context = context[1:] + [ix]
        names.append("".join(chars[i] for i in out))
    return names


def checkpoint_stats(saved: dict, data_path: str | None, block_size: int) -> BatchNormStats:
    """A checkpoint's batchnorm statistics; a periodic one saved without them (see
    ``loop.calibration_due``) is calibrated here from the run's data (``data_path`` or the
    path it recorded)."""
    if saved["bn_stats"] is not None:
        return BatchNormStats(**saved["bn_stats"])
    path = Path(data_path or saved["data"]["path"])
    data = load_dataset(path, block_size) if path.is_file() else None
    if data is None or data.sha256 != saved["data"]["sha256"]:
        raise SamplingError(
            f"the checkpoint was saved mid-run without batchnorm statistics and the run's "
            f"data ({path}) is not there to compute them: give --data PATH"
        )
    return calibrate(saved["params"], data.X_train)
