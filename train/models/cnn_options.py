"""The CNN's run options and command line: its config; the optimizers, data and monitor options
are the classifier's (``classifier_options``), with their defaults.

A new run takes what was given and the chosen optimizer's own defaults; a resumed run takes its
checkpoint's config, and may change only ``--steps`` (to go further) and ``--backward``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from train import preflight
from train.cli import positive
from train.config import Schedule
from train.models import OptionGroups
from train.models.classifier_options import (
    DEFAULT_WEIGHT_DECAY,
    OPTIMIZERS,
    checked_options,
    shared_options,
    with_defaults,
)
from train.preflight import UsageError

# AdamW's decay 0.1 rather than the classifier's 0.01: over seeds 2147483647, 1, 2, 3 the
# default run's test accuracy on the digits was 98.9/98.5/98.2/98.9% with it and
# 98.5/98.5/97.8/98.5% with 0.01 (docs/training.md)
WEIGHT_DECAY = {**DEFAULT_WEIGHT_DECAY, "adamw": 0.1}


@dataclass(frozen=True)
class CNNConfig(Schedule, steps=2000, seed=2147483647, lr=0.001, batch_size=64):
    """One run: the conv blocks, the optimizer and its schedule, the numbers' type, the backward."""

    channels: tuple[int, ...] = (32, 64)
    kernel: int = 3
    optimizer: str = "adamw"
    momentum: float = 0.0
    weight_decay: float = 0.1
    clip_grad_norm: float = 0.0  # 0: no clipping

    @classmethod
    def choices(cls) -> dict[str, tuple[str, ...]]:
        return {**super().choices(), "optimizer": OPTIMIZERS}


def options(groups: OptionGroups) -> None:
    channels = ",".join(map(str, CNNConfig.channels))
    groups.run.add_argument(
        "--channels",
        metavar="C1,C2,..",
        help=f"output channels of each conv -> ReLU -> 2x2 max pool block ({channels})",
    )
    groups.run.add_argument(
        "--kernel",
        type=positive(),
        metavar="K",
        help=f"the convs' K x K kernel, odd; zero padding K // 2 keeps the size "
        f"({CNNConfig.kernel})",
    )
    shared_options(groups, CNNConfig, WEIGHT_DECAY)
    groups.out.add_argument(
        "--check-every",
        type=positive(),
        metavar="K",
        help="every K steps print the generated gradients against autograd's on the first "
        "batch of training images",
    )


def parse_channels(text: str) -> tuple[int, ...]:
    """'16,32' -> (16, 32): one conv block each."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--channels wants channel counts like 16,32, got {text!r}")
    return sizes


def resolve_config(args: argparse.Namespace, saved: dict | None) -> CNNConfig:
    """The given options over the checkpoint's (``saved``) over the defaults."""
    given = checked_options(args, CNNConfig)
    if "channels" in given:
        given["channels"] = parse_channels(given["channels"])
    if given.get("kernel", 1) % 2 == 0:
        raise UsageError(
            f"--kernel must be odd (padding K // 2 keeps the size), got {given['kernel']}"
        )
    if saved is None:
        return with_defaults(given, CNNConfig, WEIGHT_DECAY)
    return preflight.resolve(CNNConfig, given, saved)
