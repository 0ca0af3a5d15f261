"""``python -m train``: options, then train (or resume) and report, or sample from a checkpoint.

Errors a user can fix (data, checkpoint, options) print one line and exit 2; a diverged run
exits 1; Ctrl-C saves a checkpoint and exits 130, the shell's code for SIGINT.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from train import checkpoint, loop, preflight
from train.config import DEFAULT_LR, DTYPES, OPTIMIZERS, TrainConfig
from train.data import DATA_ENV, DataError, load_dataset, resolve_data_path
from train.device import add_device_options, start_on_device
from train.engine import guarded, session
from train.finish import finish
from train.preflight import UsageError
from train.progress import Progress
from train.sample import SEED_LIMIT, SamplingError, checkpoint_stats, sample_names, sampler_seed

DEFAULTS = TrainConfig()
# options a resumed run may change: more steps, or the other (numerically equal) backward
RESUMABLE = {"steps", "backward"}


MAX_SAMPLE = 10_000  # names one --sample prints; the GPT draws them all in one batch
MAX_THREADS = 1024  # torch takes any count, then overflows (2**40) or starts them all


def positive(minimum: int = 1, maximum: int | None = None):
    """argparse type: an int no smaller than ``minimum`` (and no larger than ``maximum``)."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}, got {value}")
        return value

    parse.__name__ = "int"  # argparse's message for a non-number: "invalid int value: 'x'"
    return parse


def seed(text: str) -> int:
    """argparse type: a torch generator seed, an int in [0, 2**64)."""
    value = int(text)
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**64 - 1], got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number above 0."""
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


EPILOG = """examples:
  python -m train --data names.txt                 the seed's run (200k steps), into runs/default
  python -m train --steps 20000 --out runs/short   a short run
  python -m train --resume --out runs/short        continue after Ctrl-C (same result as no stop)
  python -m train --sample 10 --out runs/short     10 names from the saved model
  python -m train --backward autograd --check-every 10000   the reference, with gradient tables
"""


def build_parser() -> argparse.ArgumentParser:
    p, run = preflight.new_parser(
        "python -m train",
        "Train the seed's character-level MLP (makemore) with the backward passes\n"
        "in generated/ and no loss.backward(). The defaults reproduce the seed's run.",
        EPILOG,
    )
    add_run_options(run)
    p.add_argument(
        "--data",
        metavar="PATH",
        help="a text file with one word per line; the vocabulary is '.' plus the file's sorted "
        f"characters. Default: ${DATA_ENV}, else the makemore names.txt, downloaded to data/ "
        "and checked against its sha256",
    )
    add_output_options(p.add_argument_group("output and control"))
    return p


def add_run_options(run: argparse._ArgumentGroup) -> None:
    """Defaults are None so a resumed run can tell options given now from defaults."""
    d = DEFAULTS
    run.add_argument(
        "--steps",
        type=positive(),
        metavar="N",
        help=f"steps ({d.steps:,}); on --resume, more extends the run",
    )
    run.add_argument("--seed", type=seed, metavar="N", help=f"seed of init and batches ({d.seed})")
    run.add_argument(
        "--lr",
        type=positive_float,
        metavar="X",
        help="learning rate X for the first half of the steps, then X/10 from step steps//2 "
        f"({DEFAULT_LR['sgd']} for sgd, {DEFAULT_LR['adamw']} for adamw)",
    )
    run.add_argument("--batch-size", type=positive(2), metavar="N", help=f"({d.batch_size})")
    run.add_argument("--n-embd", type=positive(), metavar="N", help=f"embedding size ({d.n_embd})")
    run.add_argument(
        "--n-hidden", type=positive(), metavar="N", help=f"hidden units ({d.n_hidden})"
    )
    run.add_argument("--block-size", type=positive(), metavar="N", help=f"context ({d.block_size})")
    run.add_argument("--dtype", choices=sorted(DTYPES), help=f"parameter dtype ({d.dtype})")
    run.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        help=f"torch.optim optimizer fed the gradients through .grad ({d.optimizer})",
    )
    preflight.add_backward_option(run, "the same model, init and batches")


def add_output_options(out: argparse._ArgumentGroup) -> None:
    out.add_argument(
        "--out", metavar="DIR", default=preflight.DEFAULT_OUT, help="run folder (%(default)s)"
    )
    out.add_argument("--checkpoint", metavar="PATH", help="checkpoint file (DIR/checkpoint.pt)")
    out.add_argument(
        "--checkpoint-every", type=positive(), default=10_000, metavar="N", help="(%(default)s)"
    )
    out.add_argument("--resume", action="store_true", help="continue the run in the checkpoint")
    out.add_argument(
        "--overwrite",
        action="store_true",
        help="start over the run in the checkpoint (only ever replaces a backgen checkpoint)",
    )
    out.add_argument("--metrics", metavar="FILE", help="also write the metrics JSON here")
    out.add_argument(
        "--check-every",
        type=positive(0),
        default=0,
        metavar="K",
        help="every K steps print the generated-vs-autograd gradient table (0: never)",
    )
    out.add_argument(
        "--sample", type=positive(1, MAX_SAMPLE), metavar="K", help="print K names and exit"
    )
    out.add_argument(
        "--threads",
        type=positive(1, MAX_THREADS),
        default=1,
        metavar="N",
        help="torch CPU threads (%(default)s): batch-32 ops gain little from more, and two "
        "threads run 4x slower when another process holds one of the cores",
    )
    add_device_options(out)


def checkpoint_path(args: argparse.Namespace) -> Path:
    return Path(args.checkpoint) if args.checkpoint else Path(args.out) / "checkpoint.pt"


def resolve_config(args: argparse.Namespace, saved: dict | None) -> TrainConfig:
    """Options given now over the checkpoint's (when resuming) over the defaults."""
    given = preflight.given_options(args, TrainConfig)
    if saved is None:
        given.setdefault("lr", DEFAULT_LR[given.get("optimizer", DEFAULTS.optimizer)])
        return TrainConfig(**given)
    config = TrainConfig.from_dict(saved["config"])
    return preflight.resume_config(config, given, saved["step"], RESUMABLE)


def start(args: argparse.Namespace, ckpt: Path) -> loop.Run:
    """A new run, or the checkpoint's run when resuming, with its data loaded and checked.

    Every refusal comes before the first step: clashing flags, a file the run may not
    replace, data that is not the checkpoint's, a batch that would not fit in memory.
    """
    preflight.check_options(args)
    preflight.check_run_paths(args, ckpt, "loss.png")
    saved = checkpoint.load(ckpt) if args.resume else None
    if saved is None:
        preflight.check_new_run(args, ckpt)
    config = checkpoint.usable(ckpt, lambda: resolve_config(args, saved), saved)
    stored_path = saved["data"]["path"] if saved else None
    data_arg = args.data or (stored_path if stored_path and Path(stored_path).is_file() else None)
    data_path = resolve_data_path(data_arg)
    preflight.check_examples_fit(data_path, config.block_size)
    data = load_dataset(data_path, config.block_size)
    preflight.check_numbers(config)
    preflight.check_memory(config, len(data.chars), len(data.Y_train))
    if saved is None:
        return loop.new_run(config, data, str(data_path))
    if data.sha256 != saved["data"]["sha256"]:
        raise UsageError(f"{data_path} is not the data this checkpoint was trained on")
    return checkpoint.usable(ckpt, lambda: loop.restore_run(saved, config, data, str(data_path)))


def describe(run: loop.Run) -> str:
    c, d = run.config, run.data
    n_params = sum(p.numel() for p in run.params.values())
    return (
        f"{n_params:,} parameters, vocabulary {len(d.chars)}, examples train {len(d.Y_train):,} "
        f"/ val {len(d.Y_val):,} / test {len(d.Y_test):,}\n"
        f"backward {c.backward}, {c.dtype}, {c.optimizer} lr {c.lr:g} then {c.lr / 10:g} from "
        f"step {c.steps // 2:,}, batch {c.batch_size}, steps {run.step:,} -> {c.steps:,}"
    )


def cmd_train(args: argparse.Namespace) -> int:
    ckpt = checkpoint_path(args)
    run = start_on_device(args, ckpt, start)
    print(describe(run), flush=True)
    progress = Progress(run.config.steps, run.step, history=run.losses[-1000:])
    metrics_file = Path(args.metrics) if args.metrics else None

    return session(
        run,
        ckpt,
        lambda: loop.train(
            run, ckpt, args.checkpoint_every, args.check_every, progress, args.compile
        ),
        progress,
        lambda: loop.save(run, ckpt),
        lambda: finish(run, ckpt, Path(args.out), metrics_file),
        preflight.command(args, "--resume"),
    )


def cmd_sample(args: argparse.Namespace) -> int:
    """Names from a saved run, without data or training; the same sampler seed as a run's end."""
    ckpt = checkpoint_path(args)
    saved = checkpoint.load(ckpt)

    def names() -> list[str]:
        config = TrainConfig.from_dict(saved["config"])
        seed = args.seed if args.seed is not None else config.seed
        g = torch.Generator().manual_seed(sampler_seed(seed))
        stats = checkpoint_stats(saved, args.data, config.block_size)
        return sample_names(
            saved["params"], stats, saved["chars"], config.block_size, args.sample, g
        )

    print("\n".join(checkpoint.usable(ckpt, names)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising for every expected failure."""
    args = build_parser().parse_args(argv)
    errors = (DataError, checkpoint.CheckpointError, UsageError, SamplingError)
    return guarded(
        args.threads, lambda: cmd_sample(args) if args.sample else cmd_train(args), errors
    )
