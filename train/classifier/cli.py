"""``python -m train --model classifier``: options, then train (or resume), test and report.

Errors a user can fix (data, checkpoint, options) print one line and exit 2; a diverged run
exits 1; Ctrl-C saves a checkpoint and exits 130. The same codes as the MLP's ``train.cli``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields, replace
from pathlib import Path

import torch

from train import checkpoint
from train.classifier import loop
from train.classifier.config import (
    BACKWARDS,
    DEFAULT_LR,
    DEFAULT_MOMENTUM,
    DEFAULT_WEIGHT_DECAY,
    DTYPES,
    MOMENTUM_OPTIMIZERS,
    OPTIMIZERS,
    ClassifierConfig,
)
from train.classifier.data import DIGITS, MNIST_ENV, load_data
from train.classifier.monitor import ClassifierProgress
from train.classifier.report import finish, write_progress
from train.data import DataError
from train.loop import Diverged, Interrupted

DEFAULTS = ClassifierConfig()
RESUMABLE = {"steps", "backward"}  # a resumed run may go further, or switch the equal backward
EXIT_USAGE, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 1, 130
PROG = "python -m train --model classifier"
MONITOR_EVERY = 50


class UsageError(Exception):
    """Options that do not fit together; printed without a traceback."""


def positive(text: str) -> int:
    """argparse type: an int of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


EPILOG = f"""examples (each is `{PROG} ...`):
  (no options)                        MNIST if found, else the bundled 8x8 digits; Adam
  --data digits --optimizer sgd       SGD with momentum 0.9 on the digits
  --optimizer rmsprop --clip-grad-norm 1     RMSprop with momentum, gradients clipped
  --resume --out runs/classifier      continue after Ctrl-C (the same result as no stop)
  --backward autograd                 the same run through torch autograd
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Train the seed's MLP digit classifier (linear -> ReLU -> ... -> linear -> "
        "cross-entropy)\nwith the backward chained from generated/ modules, no loss.backward().",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(p.add_argument_group("run (stored in the checkpoint; --resume reuses them)"))
    add_data_options(p.add_argument_group("data"))
    add_output_options(p.add_argument_group("output and control"))
    return p


def add_run_options(run: argparse._ArgumentGroup) -> None:
    """Defaults are None so a resumed run can tell options given now from defaults."""
    d = DEFAULTS
    run.add_argument("--steps", type=positive, metavar="N", help=f"({d.steps:,})")
    run.add_argument("--seed", type=int, metavar="N", help=f"seed of init and batches ({d.seed})")
    run.add_argument("--batch-size", type=positive, metavar="N", help=f"({d.batch_size})")
    run.add_argument(
        "--hidden",
        metavar="H1,H2,..",
        help=f"hidden layer sizes ({','.join(map(str, d.hidden))}); 'none': softmax regression",
    )
    run.add_argument(
        "--optimizer",
        metavar="NAME",
        help=f"torch.optim optimizer fed the gradients through .grad: {', '.join(OPTIMIZERS)} "
        f"({d.optimizer})",
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
    run.add_argument("--dtype", choices=sorted(DTYPES), help=f"({d.dtype})")
    run.add_argument(
        "--backward",
        choices=BACKWARDS,
        help="generated: the loop over generated/ modules (default); autograd: the same run "
        "with F.relu, F.cross_entropy and loss.backward()",
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
    out.add_argument("--threads", type=positive, default=1, metavar="N", help="(%(default)s)")


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
    given = {f.name: getattr(args, f.name) for f in fields(ClassifierConfig)}
    given = {k: v for k, v in given.items() if v is not None}
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
    clash = [k for k, v in given.items() if k not in RESUMABLE and v != getattr(config, k)]
    if clash:
        was = ", ".join(f"--{k.replace('_', '-')} {getattr(config, k)}" for k in clash)
        raise UsageError(f"the checkpoint's run used {was}; drop those options to resume it")
    config = replace(config, **{k: v for k, v in given.items() if k in RESUMABLE})
    if config.steps < saved["step"]:
        raise UsageError(f"the checkpoint is at step {saved['step']}, past --steps {config.steps}")
    return config


def checkpoint_path(args: argparse.Namespace) -> Path:
    return Path(args.checkpoint) if args.checkpoint else Path(args.out) / "checkpoint.pt"


def start(args: argparse.Namespace, ckpt: Path) -> loop.Run:
    """A new run, or the checkpoint's run when resuming, with its data loaded and checked."""
    saved = loop.load_checkpoint(ckpt) if args.resume else None
    if saved is None and ckpt.exists() and not args.overwrite:
        raise UsageError(
            f"{ckpt} already holds a run; add --resume to continue it, --overwrite to start "
            "over, or pick another --out"
        )
    config = resolve_config(args, saved)
    data_arg = args.data
    if saved and not data_arg:
        data_arg = DIGITS if saved["data"]["name"] == DIGITS else saved["data"]["source"]
    verify = not args.no_verify and not (saved and saved["data"]["name"] == "idx")
    data = load_data(data_arg, verify=verify)
    if saved is None:
        return loop.new_run(config, data, args.monitor_every or MONITOR_EVERY)
    if data.sha256 != saved["data"]["sha256"]:
        raise UsageError(f"{data.source} is not the data this checkpoint was trained on")
    return loop.restore_run(saved, config, data, args.monitor_every)


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
    hint = f"{PROG} --resume --out {args.out}"
    return hint + (f" --checkpoint {args.checkpoint}" if args.checkpoint else "")


def cmd_train(args: argparse.Namespace) -> int:
    ckpt = checkpoint_path(args)
    run = start(args, ckpt)
    print(describe(run), flush=True)
    out_dir, metrics_file = Path(args.out), Path(args.metrics) if args.metrics else None
    progress = ClassifierProgress(run.config.steps, run.step)
    try:
        try:
            loop.train(
                run,
                ckpt,
                args.checkpoint_every,
                progress,
                lambda r: write_progress(r, out_dir, metrics_file),
            )
        finally:
            progress.close()
    except Interrupted:
        checkpoint.save(ckpt, loop.snapshot(run))
        print(f"interrupted at step {run.step:,}; saved {ckpt}", file=sys.stderr)
        print(f"resume with: {resume_hint(args)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # a second Ctrl-C: stopped mid-step, so nothing is saved
        print(f"stopped without saving. {last_good(ckpt)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    done = finish(run, ckpt, out_dir, metrics_file, figure=not args.no_figure)
    return 0 if done else EXIT_DIVERGED


def last_good(ckpt: Path) -> str:
    try:
        return (
            f"Kept the last good checkpoint {ckpt} (step {loop.load_checkpoint(ckpt)['step']:,})."
        )
    except checkpoint.CheckpointError:
        return "No checkpoint was written before that."


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising for every expected failure."""
    args = build_parser().parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return cmd_train(args)
    except (DataError, checkpoint.CheckpointError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Diverged as exc:
        print(
            f"error: training diverged: {exc}. {last_good(checkpoint_path(args))}", file=sys.stderr
        )
        print("Try a smaller --lr, or --clip-grad-norm.", file=sys.stderr)
        return EXIT_DIVERGED
    except KeyboardInterrupt:
        print("interrupted; nothing was saved", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        torch.set_num_threads(threads)
