"""The classifier's run options and command line: its config, the optimizers' own defaults.

A new run takes what was given and the chosen optimizer's own defaults; a resumed run takes its
checkpoint's config, and may change only ``--steps`` (to go further) and ``--backward``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from train import preflight
from train.cli import positive
from train.config import Schedule
from train.models import OptionGroups
from train.models.classifier_data import DIGITS, MNIST_ENV
from train.preflight import UsageError

OPTIMIZERS = ("sgd", "rmsprop", "adam", "adamw")
MOMENTUM_OPTIMIZERS = ("sgd", "rmsprop")  # Adam and AdamW have betas instead
# --lr when not given. Plain or momentum SGD takes the raw gradient; RMSprop and Adam divide by a
# running RMS of it, so their steps are ~lr per weight and want a much smaller lr. RMSprop with
# momentum 0.9 steps ~lr/(1 - 0.9) per weight: at 1e-3 its float32 runs wander apart on the flat
# minimum once the training loss is ~0 (gradients of 1e-6 divided by their own RMS are steps of
# full size in directions set by rounding); 3e-4 reached 97.8% test with both backwards.
DEFAULT_LR = {"sgd": 0.05, "rmsprop": 0.0003, "adam": 0.001, "adamw": 0.001}
DEFAULT_MOMENTUM = 0.9
DEFAULT_WEIGHT_DECAY = {"sgd": 0.0, "rmsprop": 0.0, "adam": 0.0, "adamw": 0.01}
MONITOR_EVERY = 50


@dataclass(frozen=True)
class ClassifierConfig(Schedule, steps=2000, seed=2147483647, lr=0.001, batch_size=64):
    """One run: the network, the optimizer and its schedule, the numbers' type, the backward."""

    hidden: tuple[int, ...] = (512, 512)
    optimizer: str = "adam"
    momentum: float = 0.0
    weight_decay: float = 0.0
    clip_grad_norm: float = 0.0  # 0: no clipping

    @classmethod
    def choices(cls) -> dict[str, tuple[str, ...]]:
        return {**super().choices(), "optimizer": OPTIMIZERS}


def options(groups: OptionGroups) -> None:
    hidden = ",".join(map(str, ClassifierConfig.hidden))
    groups.run.add_argument(
        "--hidden",
        metavar="H1,H2,..",
        help=f"hidden layer sizes ({hidden}); 'none': softmax regression",
    )
    shared_options(groups, ClassifierConfig)


def shared_options(
    groups: OptionGroups, config: type, weight_decay: dict[str, float] = DEFAULT_WEIGHT_DECAY
) -> None:
    """The options every image classifier takes (the MLP's, the CNN's): the optimizer and its
    settings, the data, the monitor; ``config`` and ``weight_decay`` (by optimizer) state their
    defaults."""
    run, lrs = groups.run, ", ".join(f"{k} {v:g}" for k, v in DEFAULT_LR.items())
    run.add_argument(
        "--optimizer",
        metavar="NAME",
        help=f"torch.optim optimizer fed the gradients through .grad: {', '.join(OPTIMIZERS)} "
        f"({config.optimizer})",
    )
    run.add_argument(
        "--lr", type=float, metavar="X", help=f"X, then X/10 from the halfway step ({lrs})"
    )
    run.add_argument(
        "--momentum",
        type=float,
        metavar="M",
        help=f"for sgd and rmsprop ({DEFAULT_MOMENTUM}); --momentum 0: plain SGD",
    )
    decays = ", ".join(f"{k} {v:g}" for k, v in weight_decay.items() if v)
    run.add_argument("--weight-decay", type=float, metavar="X", help=f"({decays}, others 0)")
    run.add_argument(
        "--clip-grad-norm",
        type=float,
        metavar="X",
        help="scale the gradients to total norm at most X (torch.nn.utils.clip_grad_norm_); "
        "0: no clipping (0)",
    )
    groups.data.add_argument(
        "--data",
        metavar="DIR",
        help=f"a folder with the four MNIST IDX files (raw or .gz), or '{DIGITS}' for "
        f"scikit-learn's 8x8 digits. Default: ${MNIST_ENV}, else data/mnist/, else a download, "
        "else the digits",
    )
    groups.data.add_argument(
        "--no-verify",
        action="store_true",
        help="use IDX files whose sha256 is not MNIST's (your own data); the format is still "
        "checked",
    )
    groups.out.add_argument(
        "--monitor-every",
        type=positive(),
        metavar="K",
        help=f"record the monitor statistics, rewrite the metrics file ({MONITOR_EVERY}; "
        "a resumed run keeps its own)",
    )
    groups.out.add_argument(
        "--no-figure", action="store_true", help="skip monitor.png (saves ~1 s)"
    )


def parse_hidden(text: str) -> tuple[int, ...]:
    """'256,128' -> (256, 128); 'none' -> () (no hidden layer: softmax regression)."""
    if text.strip().lower() in ("none", ""):
        return ()
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--hidden wants sizes like 256,128 (or 'none'), got {text!r}")
    return sizes


def given_options(args: argparse.Namespace) -> dict:
    """The run options given on the command line (not None), checked one by one."""
    given = checked_options(args, ClassifierConfig)
    if "hidden" in given:
        given["hidden"] = parse_hidden(given["hidden"])
    return given


def checked_options(args: argparse.Namespace, config: type) -> dict:
    """The options of ``config`` given on the command line, the shared ones checked."""
    given = preflight.given_options(args, config)
    if given.get("optimizer", config.optimizer) not in OPTIMIZERS:
        raise UsageError(
            f"unknown optimizer {given['optimizer']!r}; choose one of {', '.join(OPTIMIZERS)}"
        )
    if "lr" in given and not given["lr"] > 0:
        raise UsageError(f"--lr must be a positive number, got {given['lr']}")
    for name in ("clip_grad_norm", "momentum", "weight_decay"):
        if name in given and not given[name] >= 0:
            flag = "--" + name.replace("_", "-")
            zero = " (0: no clipping)" if name == "clip_grad_norm" else ""
            raise UsageError(f"{flag} must be 0{zero} or a positive number, got {given[name]}")
    return given


def with_defaults(
    given: dict,
    config: type = ClassifierConfig,
    weight_decay: dict[str, float] = DEFAULT_WEIGHT_DECAY,
) -> Any:
    """A new run: what was given, the optimizer's own lr, momentum and weight decay otherwise."""
    optimizer = given.get("optimizer", config.optimizer)
    if "momentum" in given and optimizer not in MOMENTUM_OPTIMIZERS:
        raise UsageError(f"--momentum applies to sgd and rmsprop; {optimizer} has betas instead")
    given.setdefault("lr", DEFAULT_LR[optimizer])
    given.setdefault("momentum", DEFAULT_MOMENTUM if optimizer in MOMENTUM_OPTIMIZERS else 0.0)
    given.setdefault("weight_decay", weight_decay[optimizer])
    return config(**given)


def resolve_config(args: argparse.Namespace, saved: dict | None) -> ClassifierConfig:
    given = given_options(args)
    return (
        with_defaults(given) if saved is None else preflight.resolve(ClassifierConfig, given, saved)
    )
