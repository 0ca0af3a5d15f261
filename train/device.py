"""``--device`` and ``--compile``, which every model's CLI takes.

Neither is stored in a checkpoint: a run saved on one device resumes on another, compiled or
not, with the same result up to the device's rounding. A missing device is one line before
anything loads, never a traceback from deep inside torch.
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from typing import TypeVar

import torch

from train.preflight import UsageError

DEVICES = ("cpu", "cuda")
T = TypeVar("T")


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


def on_device(obj: T, device: str) -> T:
    """A dataclass (a dataset) with every tensor field moved to ``device``."""
    tensors = {f.name: getattr(obj, f.name) for f in fields(obj)}  # type: ignore[arg-type]
    return replace(obj, **{k: v.to(device) for k, v in tensors.items() if torch.is_tensor(v)})


def move_run(run: object, device: str) -> None:
    """Move a run's parameters (in place, so its optimizer keeps them), its optimizer state
    and its data to ``device``. AdamW's ``step`` counts stay on the CPU, where torch wants them
    unless the optimizer is capturable."""
    if device == "cpu":
        return
    for p in run.params.values():  # type: ignore[attr-defined]
        p.data = p.data.to(device)
    for state in run.optimizer.state.values():  # type: ignore[attr-defined]
        for key, value in state.items():
            if torch.is_tensor(value) and key != "step":
                state[key] = value.to(device)
    run.data = on_device(run.data, device)  # type: ignore[attr-defined]


def to_cpu(tree: object) -> object:
    """Every tensor in nested dicts and lists copied to the CPU: what a checkpoint holds, so it
    loads on any machine."""
    if torch.is_tensor(tree):
        return tree.detach().cpu()
    if isinstance(tree, dict):
        return {k: to_cpu(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(to_cpu(v) for v in tree)
    return tree
