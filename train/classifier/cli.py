"""``python -m train --model classifier``: options, then train (or resume), test and report.

Errors a user can fix (data, checkpoint, options) print one line and exit 2; a diverged run
exits 1; Ctrl-C saves a checkpoint and exits 130. The same codes as the MLP's ``train.cli``.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from train import checkpoint, preflight
from train.classifier import loop
from train.classifier.config import MOMENTUM_OPTIMIZERS, ClassifierConfig
from train.classifier.data import DIGITS, Dataset, load_data
from train.classifier.monitor import ClassifierProgress
from train.classifier.options import (
    MONITOR_EVERY,
    PROG,
    UsageError,
    build_parser,
    resolve_config,
)
from train.classifier.report import finish, write_progress
from train.data import DataError
from train.device import start_on_device
from train.engine import guarded, session

MAKE_ENV = "BACKGEN_MAKE_TARGET"  # `make classifier` sets it, so hints name the make line


def checkpoint_path(args: argparse.Namespace) -> Path:
    return Path(args.checkpoint) if args.checkpoint else Path(args.out) / "checkpoint.pt"


def check_paths(args: argparse.Namespace, ckpt: Path) -> None:
    """Before anything loads: a run replaces only files a run wrote, and only when told to."""
    preflight.check_options(args)  # --resume with --overwrite, --out a file, ...
    if not args.resume and ckpt.exists():
        if not checkpoint.is_checkpoint(ckpt):
            raise UsageError(
                f"{ckpt} exists and is not a backgen training checkpoint; refusing to replace "
                "it: choose another --out or --checkpoint"
            )
        if not args.overwrite:
            raise UsageError(
                f"{ckpt} already holds a run; add --resume to continue it, --overwrite to "
                "start over, or pick another --out"
            )
    preflight.check_run_paths(args, ckpt, "monitor.png")


def start(args: argparse.Namespace, ckpt: Path) -> loop.Run:
    """A new run, or the checkpoint's run when resuming, with its data loaded and checked."""
    check_paths(args, ckpt)
    saved = loop.load_checkpoint(ckpt) if args.resume else None
    config = checkpoint.usable(ckpt, lambda: resolve_config(args, saved), saved)
    preflight.check_numbers(config)
    data_arg = args.data
    if saved and not data_arg:
        data_arg = DIGITS if saved["data"]["name"] == DIGITS else saved["data"]["source"]
    verify = not args.no_verify and not (saved and saved["data"]["name"] == "idx")
    data = load_data(data_arg, verify=verify)
    check_memory(config, data)
    if saved is None:
        return loop.new_run(config, data, args.monitor_every or MONITOR_EVERY)
    if data.sha256 != saved["data"]["sha256"]:
        raise UsageError(f"{data.source} is not the data this checkpoint was trained on")
    return checkpoint.usable(
        ckpt, lambda: loop.restore_run(saved, config, data, args.monitor_every)
    )


def check_memory(config: ClassifierConfig, data: Dataset) -> None:
    """Refuse a network or batch that would not fit, before its parameters are allocated.

    In items of the dtype: parameters with their gradients, two optimizer states and the float32
    draw of the initialisation (~5 per parameter); per example of a batch 4 activations or
    gradients of every layer's width; evaluating a whole split holds every layer's output.
    """
    sizes = [data.n_features, *config.hidden, 10]
    n_params = sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
    split = max(len(data.Y_train), len(data.Y_val), len(data.Y_test))
    item = 8 if config.dtype == "float64" else 4
    need = (5 * n_params + max(4 * config.batch_size, 2 * split) * sum(sizes)) * item
    what = (
        f"--hidden {','.join(map(str, config.hidden)) or 'none'} --batch-size {config.batch_size}"
    )
    preflight.check_fits(need, what, "use smaller --hidden sizes or --batch-size")


def describe(run: loop.Run) -> str:
    c, d = run.config, run.data
    n_params = sum(p.numel() for p in run.params.values())
    sizes = " -> ".join(str(n) for n in [d.n_features, *c.hidden, 10])
    extra = f" momentum {c.momentum:g}" if c.optimizer in MOMENTUM_OPTIMIZERS else ""
    extra += f" weight decay {c.weight_decay:g}" if c.weight_decay else ""
    extra += f", clip grad norm {c.clip_grad_norm:g}" if c.clip_grad_norm else ""
    return (
        f"data: {d.source}: train {len(d.Y_train):,} / val {len(d.Y_val):,} / test "
        f"{len(d.Y_test):,} images of {d.image_shape[0]}x{d.image_shape[1]}\n"
        f"MLP {sizes} ({n_params:,} parameters), backward {c.backward}, {c.dtype}\n"
        f"{c.optimizer} lr {c.lr:g} then {c.lr / 10:g} from step {c.steps // 2:,}{extra}, "
        f"batch {c.batch_size}, steps {run.step:,} -> {c.steps:,}"
    )


def resume_hint(args: argparse.Namespace) -> str:
    """How to continue: the make line under ``make classifier``, else the python one."""
    flags = f"--resume --out {args.out}" + (
        f" --checkpoint {args.checkpoint}" if args.checkpoint else ""
    )
    if os.environ.get(MAKE_ENV) == "classifier":
        return f"make classifier CLASSIFIER_ARGS={shlex.quote(flags)}"
    return f"{PROG} {flags}"


def cmd_train(args: argparse.Namespace) -> int:
    ckpt = checkpoint_path(args)
    run = start_on_device(args, ckpt, start)
    print(describe(run), flush=True)
    out_dir, metrics_file = Path(args.out), Path(args.metrics) if args.metrics else None
    progress = ClassifierProgress(run.config.steps, run.step)

    on_record = lambda r: write_progress(r, out_dir, metrics_file)  # noqa: E731
    return session(
        run,
        ckpt,
        lambda: loop.train(run, ckpt, args.checkpoint_every, progress, on_record, args.compile),
        progress,
        lambda: loop.save(run, ckpt),
        lambda: finish(run, ckpt, out_dir, metrics_file, figure=not args.no_figure),
        resume_hint(args),
        advice="Try a smaller --lr, or --clip-grad-norm.",
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising for every expected failure."""
    args = build_parser().parse_args(argv)
    errors = (DataError, checkpoint.CheckpointError, UsageError)
    return guarded(args.threads, lambda: cmd_train(args), errors)
