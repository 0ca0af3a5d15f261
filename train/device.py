"""``--device`` and ``--compile``, which every model's CLI takes.

Neither is stored in a checkpoint: a run saved on one device resumes on another, compiled or
not, with the same result up to the device's rounding. A missing device is one line before
anything loads, never a traceback from deep inside torch.
"""

from __future__ import annotations

import argparse

import torch

from train.preflight import UsageError

DEVICES = ("cpu", "cuda")


def add_device_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where parameters, batches and the step live (%(default)s)",
    )
    group.add_argument(
        "--compile",
        action="store_true",
        help="run the hand-chained generated step (or autograd's) under torch.compile",
    )


def check_device(name: str, local_rank: int = 0) -> str:
    """The torch device string for ``--device name``; UsageError when it is not here."""
    if name == "cuda":
        if not torch.cuda.is_available():
            build = torch.version.cuda and f"CUDA {torch.version.cuda}" or "CPU only"
            raise UsageError(
                f"--device cuda: no CUDA device is available here (torch {torch.__version__}, "
                f"{build}); use --device cpu"
            )
        return f"cuda:{local_rank}"
    return "cpu"
