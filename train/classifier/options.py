"""The classifier's command line: the options, and the run config they resolve to.

A new run takes what was given and the chosen optimizer's own defaults; a resumed run takes its
checkpoint's config, and may change only ``--steps`` (to go further) and ``--backward``.
"""

from __future__ import annotations

import argparse

from train import preflight
from train.classifier.config import (
    DEFAULT_LR,
    DEFAULT_MOMENTUM,
    DEFAULT_WEIGHT_DECAY,
    MOMENTUM_OPTIMIZERS,
    OPTIMIZERS,
    ClassifierConfig,
)
from train.classifier.data import DIGITS, MNIST_ENV
from train.cli import MAX_THREADS, seed
from train.cli import positive as positive_int
from train.config import DTYPES
from train.device import add_device_options
from train.preflight import UsageError  # noqa: F401 (the classifier's CLI imports it here)

DEFAULTS = ClassifierConfig()
RESUMABLE = {"steps", "backward"}  # a resumed run may go further, or switch the equal backward
PROG = "python -m train --model classifier"
MONITOR_EVERY = 50


positive = positive_int()


EPILOG = f"""examples (each is `{PROG} ...`):
  (no options)                        MNIST if found, else the bundled 8x8 digits; Adam
  --data digits --optimizer sgd       SGD with momentum 0.9 on the digits
  --optimizer rmsprop --clip-grad-norm 1     RMSprop with momentum, gradients clipped
  --resume --out runs/classifier      continue after Ctrl-C (the same result as no stop)
  --backward autograd                 the same run through torch autograd
"""


def build_parser() -> argparse.ArgumentParser:
    p, run = preflight.new_parser(
        PROG,
        "Train the seed's MLP digit classifier (linear -> ReLU -> ... -> linear -> "
        "cross-entropy)\nwith the backward chained from generated/ modules, no loss.backward().",
        EPILOG,
    )
    add_run_options(run)
    add_optimizer_options(run)
    add_data_options(p.add_argument_group("data"))
    add_output_options(p.add_argument_group("output and control"))
    return p


def add_run_options(run: argparse._ArgumentGroup) -> None:
    """Defaults are None so a resumed run can tell options given now from defaults."""
    d = DEFAULTS
    run.add_argument("--steps", type=positive, metavar="N", help=f"({d.steps:,})")
    run.add_argument("--seed", type=seed, metavar="N", help=f"seed of init and batches ({d.seed})")
    run.add_argument("--batch-size", type=positive, metavar="N", help=f"({d.batch_size})")
    run.add_argument(
        "--hidden",
        metavar="H1,H2,..",
        help=f"hidden layer sizes ({','.join(map(str, d.hidden))}); 'none': softmax regression",
    )
    run.add_argument("--dtype", choices=sorted(DTYPES), help=f"({d.dtype})")
    preflight.add_backward_option(run, "the same run through F.relu, F.cross_entropy")


def add_optimizer_options(run: argparse._ArgumentGroup) -> None:
    """The optimizer and its settings; unset ones take the optimizer's defaults (config.py)."""
    run.add_argument(
        "--optimizer",
        metavar="NAME",
        help=f"torch.optim optimizer fed the gradients through .grad: {', '.join(OPTIMIZERS)} "
        f"({DEFAULTS.optimizer})",
    )
    lrs = ", ".join(f"{k} {v:g}" for k, v in DEFAULT_LR.items())
    run.add_argument(
        "--lr", type=float, metavar="X", help=f"X, then X/10 from the halfway step ({lrs})"
    )
    run.add_argument(
        "--momentum",
        type=float,
        metavar="M",
        help=f"for sgd and rmsprop ({DEFAULT_MOMENTUM}); --momentum 0: plain SGD",
    )
    run.add_argument("--weight-decay", type=float, metavar="X", help="(adamw 0.01, others 0)")
    run.add_argument(
        "--clip-grad-norm",
        type=float,
        metavar="X",
        help="scale the gradients to total norm at most X (torch.nn.utils.clip_grad_norm_); "
        "0: no clipping (0)",
    )


def add_data_options(data: argparse._ArgumentGroup) -> None:
    data.add_argument(
        "--data",
        metavar="DIR",
        help=f"a folder with the four MNIST IDX files (raw or .gz), or '{DIGITS}' for "
        f"scikit-learn's 8x8 digits. Default: ${MNIST_ENV}, else data/mnist/, else a download, "
        "else the digits",
    )
    data.add_argument(
        "--no-verify",
        action="store_true",
        help="use IDX files whose sha256 is not MNIST's (your own data); the format is still "
        "checked",
    )


def add_output_options(out: argparse._ArgumentGroup) -> None:
    out.add_argument("--out", metavar="DIR", default="runs/classifier", help="(%(default)s)")
    out.add_argument("--checkpoint", metavar="PATH", help="(DIR/checkpoint.pt)")
    out.add_argument(
        "--checkpoint-every", type=positive, default=1000, metavar="N", help="(%(default)s)"
    )
    out.add_argument(
        "--monitor-every",
        type=positive,
        metavar="K",
        help=f"record the monitor statistics, rewrite the metrics file ({MONITOR_EVERY}; "
        "a resumed run keeps its own)",
    )
    out.add_argument("--resume", action="store_true", help="continue the run in the checkpoint")
    out.add_argument("--overwrite", action="store_true", help="start over an existing run")
    out.add_argument("--metrics", metavar="FILE", help="also write the metrics JSON here")
    out.add_argument("--no-figure", action="store_true", help="skip monitor.png (saves ~1 s)")
    out.add_argument(
        "--threads", type=positive_int(1, MAX_THREADS), default=1, metavar="N", help="(%(default)s)"
    )
    add_device_options(out)


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
    given = preflight.given_options(args, ClassifierConfig)
    if "hidden" in given:
        given["hidden"] = parse_hidden(given["hidden"])
    if given.get("optimizer", DEFAULTS.optimizer) not in OPTIMIZERS:
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


def with_defaults(given: dict) -> ClassifierConfig:
    """A new run: what was given, the optimizer's own lr, momentum and weight decay otherwise."""
    optimizer = given.get("optimizer", DEFAULTS.optimizer)
    if "momentum" in given and optimizer not in MOMENTUM_OPTIMIZERS:
        raise UsageError(f"--momentum applies to sgd and rmsprop; {optimizer} has betas instead")
    given.setdefault("lr", DEFAULT_LR[optimizer])
    given.setdefault("momentum", DEFAULT_MOMENTUM if optimizer in MOMENTUM_OPTIMIZERS else 0.0)
    given.setdefault("weight_decay", DEFAULT_WEIGHT_DECAY[optimizer])
    return ClassifierConfig(**given)


def resolve_config(args: argparse.Namespace, saved: dict | None) -> ClassifierConfig:
    """Options given now over the checkpoint's (when resuming) over the defaults."""
    given = given_options(args)
    if saved is None:
        return with_defaults(given)
    config = ClassifierConfig.from_dict(saved["config"])
    return preflight.resume_config(config, given, saved["step"], RESUMABLE)
