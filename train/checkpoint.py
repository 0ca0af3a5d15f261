"""Checkpoint files: written atomically, readable with ``torch.load(weights_only=True)``.

A checkpoint is a plain dict of tensors, ints, floats, strings, lists and dicts (no pickled
classes), so loading one never runs code. It is written to a temporary file in the same folder
and moved over the old one with ``os.replace``, so a crash or Ctrl-C mid-write leaves the
previous checkpoint intact.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

FORMAT = "backgen-train/1"
REQUIRED = ("config", "chars", "step", "params", "optimizer", "generator", "losses", "bn_stats")


class CheckpointError(Exception):
    """A checkpoint that is missing, unreadable or not ours; the CLI prints the message."""


def save(path: Path, payload: dict) -> None:
    """Write ``payload`` to ``path`` atomically (temp file + fsync + os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({"format": FORMAT, **payload}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: Path) -> dict:
    """Read a checkpoint written by ``save``, with ``weights_only=True``."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, weights_only=True)
    except Exception as exc:  # torch raises several types for a damaged or foreign file
        raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a backgen training checkpoint")
    missing = [key for key in REQUIRED if key not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    return payload
