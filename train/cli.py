"""``python -m train``: options, then train (or resume) and report, or sample from a checkpoint.

Errors a user can fix (data, checkpoint, options) print one line and exit 2; a diverged run
exits 1; Ctrl-C saves a checkpoint and exits 130, the shell's code for SIGINT.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import fields, replace
from pathlib import Path

import torch

from train import checkpoint, loop
from train.config import BACKWARDS, DEFAULT_LR, DTYPES, OPTIMIZERS, TrainConfig
from train.data import DATA_ENV, DataError, load_dataset, resolve_data_path
from train.model import BatchNormStats, split_loss
from train.progress import Progress
from train.report import save_loss_curve, write_metrics
from train.sample import SamplingError, sample_names

DEFAULTS = TrainConfig()
# options a resumed run may change: more steps, or the other (numerically equal) backward
RESUMABLE = {"steps", "backward"}
SAMPLE_SEED_OFFSET = 10  # the seed samples from a generator seeded 2147483647 + 10
EXIT_USAGE, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 1, 130


class UsageError(Exception):
    """Options that do not fit together; printed without a traceback."""


def positive(minimum: int = 1):
    """argparse type: an int no smaller than ``minimum``."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Run options default to None so a resumed run can tell given options from defaults."""
    p = argparse.ArgumentParser(
        prog="python -m train",
        description="Train the seed's character-level MLP (makemore) with the backward passes "
        "in generated/, no loss.backward(). Defaults reproduce the seed's run.",
    )
    run = p.add_argument_group("run (stored in the checkpoint; --resume reuses them)")
    d = DEFAULTS
    run.add_argument("--steps", type=positive(), help=f"SGD steps (default {d.steps:,})")
    run.add_argument("--seed", type=int, help=f"generator seed for init and batches ({d.seed})")
    run.add_argument(
        "--lr",
        type=positive_float,
        help="learning rate X for the first half of the steps, then X/10 from step steps//2 "
        f"(default {DEFAULT_LR['sgd']} for sgd, {DEFAULT_LR['adamw']} for adamw)",
    )
    run.add_argument("--batch-size", type=positive(2), help=f"minibatch size ({d.batch_size})")
    run.add_argument("--n-embd", type=positive(), help=f"embedding size ({d.n_embd})")
    run.add_argument("--n-hidden", type=positive(), help=f"hidden units ({d.n_hidden})")
    run.add_argument("--block-size", type=positive(), help=f"context characters ({d.block_size})")
    run.add_argument("--dtype", choices=sorted(DTYPES), help=f"parameter dtype ({d.dtype})")
    run.add_argument("--optimizer", choices=OPTIMIZERS, help=f"optimizer ({d.optimizer})")
    run.add_argument(
        "--backward",
        choices=BACKWARDS,
        help="generated: hand-written loop over generated/ (default); autograd: the same model, "
        "init and batches with loss.backward(), for comparison",
    )
    p.add_argument(
        "--data",
        metavar="PATH",
        help="a text file with one word per line; the vocabulary is '.' plus the file's sorted "
        f"characters. Default: ${DATA_ENV}, else the makemore names.txt, downloaded to data/ "
        "and checked against its sha256",
    )
    out = p.add_argument_group("output")
    out.add_argument(
        "--out", metavar="DIR", default="runs/default", help="run folder (%(default)s)"
    )
    out.add_argument("--checkpoint", metavar="PATH", help="checkpoint file (DIR/checkpoint.pt)")
    out.add_argument(
        "--checkpoint-every", type=positive(), default=10_000, metavar="N", help="(%(default)s)"
    )
    out.add_argument("--resume", action="store_true", help="continue the run in the checkpoint")
    out.add_argument("--overwrite", action="store_true", help="start over an existing run")
    out.add_argument("--metrics", metavar="FILE", help="also write the metrics JSON here")
    out.add_argument(
        "--check-every",
        type=positive(0),
        default=0,
        metavar="K",
        help="every K steps print the generated-vs-autograd gradient table (0: never)",
    )
    out.add_argument(
        "--sample", type=positive(), metavar="K", help="print K names from the checkpoint and exit"
    )
    return p


def checkpoint_path(args: argparse.Namespace) -> Path:
    return Path(args.checkpoint) if args.checkpoint else Path(args.out) / "checkpoint.pt"


def resolve_config(args: argparse.Namespace, saved: dict | None) -> TrainConfig:
    """Options given now over the checkpoint's (when resuming) over the defaults."""
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig)}
    given = {k: v for k, v in given.items() if v is not None}
    if saved is None:
        given.setdefault("lr", DEFAULT_LR[given.get("optimizer", DEFAULTS.optimizer)])
        return TrainConfig(**given)
    config = TrainConfig.from_dict(saved["config"])
    clash = [k for k, v in given.items() if k not in RESUMABLE and v != getattr(config, k)]
    if clash:
        was = ", ".join(f"--{k.replace('_', '-')} {getattr(config, k)}" for k in clash)
        raise UsageError(f"the checkpoint's run used {was}; drop those options to resume it")
    config = replace(config, **{k: v for k, v in given.items() if k in RESUMABLE})
    if config.steps < saved["step"]:
        raise UsageError(f"the checkpoint is at step {saved['step']}, past --steps {config.steps}")
    return config


def resume_hint(args: argparse.Namespace) -> str:
    hint = f"python -m train --resume --out {args.out}"
    return hint + (f" --checkpoint {args.checkpoint}" if args.checkpoint else "")


def start(args: argparse.Namespace, ckpt: Path) -> loop.Run:
    """A new run, or the checkpoint's run when resuming, with its data loaded and checked."""
    saved = checkpoint.load(ckpt) if args.resume else None
    if saved is None and ckpt.exists() and not args.overwrite:
        raise UsageError(
            f"{ckpt} already holds a run; add --resume to continue it, --overwrite to start "
            "over, or pick another --out"
        )
    config = resolve_config(args, saved)
    stored_path = saved["data"]["path"] if saved else None
    data_arg = args.data or (stored_path if stored_path and Path(stored_path).is_file() else None)
    data_path = resolve_data_path(data_arg)
    data = load_dataset(data_path, config.block_size)
    if saved is None:
        return loop.new_run(config, data, str(data_path))
    if data.sha256 != saved["data"]["sha256"]:
        raise UsageError(f"{data_path} is not the data this checkpoint was trained on")
    return loop.restore_run(saved, config, data, str(data_path))


def describe(run: loop.Run) -> str:
    c, d = run.config, run.data
    n_params = sum(p.numel() for p in run.params.values())
    return (
        f"{n_params:,} parameters, vocabulary {len(d.chars)}, examples train {len(d.Y_train):,} "
        f"/ val {len(d.Y_val):,} / test {len(d.Y_test):,}\n"
        f"backward {c.backward}, {c.dtype}, {c.optimizer} lr {c.lr:g} then {c.lr / 10:g} from "
        f"step {c.steps // 2:,}, batch {c.batch_size}, steps {run.step:,} -> {c.steps:,}"
    )


def finish(run: loop.Run, args: argparse.Namespace, ckpt: Path) -> int:
    """Final checkpoint (with calibrated batchnorm), losses, metrics, loss curve, 20 names."""
    final = loop.snapshot(run)
    checkpoint.save(ckpt, final)
    stats = BatchNormStats(**final["bn_stats"])
    d = run.data
    train_loss = split_loss(run.params, stats, d.X_train, d.Y_train)
    val_loss = split_loss(run.params, stats, d.X_val, d.Y_val)
    print(f"train loss {train_loss:.4f}\nval loss   {val_loss:.4f}")
    metrics = {
        **run.config.as_dict(),
        "steps": run.step,
        "train_loss": finite_or_none(train_loss),
        "val_loss": finite_or_none(val_loss),
        "seconds": run.seconds,
        "steps_per_s": run.step / run.seconds if run.seconds > 0 else None,
        "last_batch_loss": run.losses[-1] if run.losses else None,
        "n_params": sum(p.numel() for p in run.params.values()),
        "data_sha256": d.sha256,
        "torch": torch.__version__,
    }
    write_metrics(Path(args.out) / "metrics.json", metrics)
    if args.metrics:
        write_metrics(Path(args.metrics), metrics)
    print(save_loss_curve(run.losses, Path(args.out) / "loss.png"))
    if not math.isfinite(train_loss + val_loss):
        print("error: the trained model's loss is not finite: training diverged.", file=sys.stderr)
        return EXIT_DIVERGED
    g = torch.Generator().manual_seed(run.config.seed + SAMPLE_SEED_OFFSET)
    names = sample_names(run.params, stats, d.chars, run.config.block_size, 20, g)
    print("samples:\n" + "\n".join(names))
    return 0


def finite_or_none(x: float) -> float | None:
    """JSON has no NaN or infinity; a diverged loss is written as null."""
    return x if math.isfinite(x) else None


def cmd_train(args: argparse.Namespace) -> int:
    ckpt = checkpoint_path(args)
    run = start(args, ckpt)
    print(describe(run), flush=True)
    progress = Progress(run.config.steps, run.step)
    try:
        try:
            loop.train(run, ckpt, args.checkpoint_every, args.check_every, progress)
        finally:
            progress.close()  # end the live line before any message
    except loop.Interrupted:
        checkpoint.save(ckpt, loop.snapshot(run))
        print(f"interrupted at step {run.step:,}; saved {ckpt}", file=sys.stderr)
        print(f"resume with: {resume_hint(args)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # a second Ctrl-C: stopped mid-step, so nothing is saved
        print(f"stopped without saving. {last_good(ckpt)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return finish(run, args, ckpt)


def last_good(ckpt: Path) -> str:
    """Where the last checkpoint written before trouble is, for the error message."""
    try:
        return f"Kept the last good checkpoint {ckpt} (step {checkpoint.load(ckpt)['step']:,})."
    except checkpoint.CheckpointError:
        return "No checkpoint was written before that."


def cmd_sample(args: argparse.Namespace) -> int:
    """Names from a saved run, without data or training; the same sampler seed as a run's end."""
    saved = checkpoint.load(checkpoint_path(args))
    config = TrainConfig.from_dict(saved["config"])
    seed = args.seed if args.seed is not None else config.seed
    g = torch.Generator().manual_seed(seed + SAMPLE_SEED_OFFSET)
    stats = BatchNormStats(**saved["bn_stats"])
    names = sample_names(saved["params"], stats, saved["chars"], config.block_size, args.sample, g)
    print("\n".join(names))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising for every expected failure."""
    args = build_parser().parse_args(argv)
    try:
        return cmd_sample(args) if args.sample else cmd_train(args)
    except (DataError, checkpoint.CheckpointError, UsageError, SamplingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except loop.Diverged as exc:
        ckpt = checkpoint_path(args)
        print(f"error: training diverged: {exc}. {last_good(ckpt)}", file=sys.stderr)
        print("Try a smaller --lr.", file=sys.stderr)
        return EXIT_DIVERGED
    except KeyboardInterrupt:
        print("interrupted; nothing was saved", file=sys.stderr)
        return EXIT_INTERRUPTED
