"""Checks before a run starts: options that clash, paths a run may not write, memory.

Everything here runs before the first step, so a mistake costs nothing: a run never trains for
minutes and then fails to save, and never replaces a file it did not write (the data, a user's
file given as ``--checkpoint``, ``--metrics`` or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, TypeVar

from train import checkpoint
from train.config import BACKWARDS, TrainConfig

DEFAULT_OUT = "runs/default"
# `make train` sets this, so hints name what a make user types (TRAIN_ARGS=...), not python
MAKE_ENV = "BACKGEN_MAKE_TARGET"
C = TypeVar("C", bound=Any)  # a run's config dataclass
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class UsageError(Exception):
    """Options that do not fit together; printed without a traceback."""


def check_options(args: argparse.Namespace) -> None:
    """Flags that contradict each other, and paths of the wrong kind, before anything loads."""
    if args.resume and args.overwrite:
        raise UsageError("--resume continues a run and --overwrite starts it over: give one")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; --out names the run's folder")
    for flag, value in (("--checkpoint", args.checkpoint), ("--metrics", args.metrics)):
        if value and Path(value).is_dir():
            raise UsageError(f"{flag} {value} is a directory; it names a file")


# what `make TARGET` passes the options in, and the run folder it trains into by default
MAKE_TARGETS = {"train": ("TRAIN_ARGS", DEFAULT_OUT), "gpt": ("GPT_ARGS", "runs/gpt")}


def command(args: argparse.Namespace, flags: str, prog: str = "python -m train") -> str:
    """How to run train again with ``flags``: the make line under make, else the python one."""
    where = f" --checkpoint {args.checkpoint}" if args.checkpoint else ""
    target = os.environ.get(MAKE_ENV)
    if target in MAKE_TARGETS:  # make passes --data itself; --out only when the user did
        variable, default_out = MAKE_TARGETS[target]
        where = (f" --out {args.out}" if args.out != default_out else "") + where
        return f"make {target} {variable}={shlex.quote(flags + where)}"
    return f"{prog} {flags} --out {args.out}{where}"


def check_new_run(args: argparse.Namespace, ckpt: Path, prog: str = "python -m train") -> None:
    """A new run may replace only a backgen checkpoint, and only when told to (--overwrite)."""
    if not ckpt.exists():
        return
    if not checkpoint.is_checkpoint(ckpt):
        raise UsageError(
            f"{ckpt} exists and is not a backgen training checkpoint; refusing to replace it "
            "(--overwrite replaces only checkpoints): choose another --out or --checkpoint"
        )
    if not args.overwrite:
        resume, overwrite = command(args, "--resume", prog), command(args, "--overwrite", prog)
        raise UsageError(
            f"{ckpt} already holds a training run; continue it with `{resume}`, start over "
            f"with `{overwrite}`, or pick another --out"
        )


def check_outputs(paths: list[Path]) -> None:
    """metrics JSON and loss.png replace only what an earlier run wrote there."""
    for path in paths:
        if not path.exists():
            continue
        if path.suffix == ".png":  # matplotlib's; a PNG a user keeps there is not told apart
            with open(path, "rb") as f:
                ours = f.read(len(PNG_SIGNATURE)) == PNG_SIGNATURE
        else:
            ours = _is_metrics(path)
        if not ours:
            raise UsageError(
                f"{path} exists and was not written by a training run; refusing to replace it"
            )


def _is_metrics(path: Path) -> bool:
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(metrics, dict) and "data_sha256" in metrics


def step_bytes(config: TrainConfig, vocab_size: int, n_train: int) -> int:
    """Estimated peak bytes of one step, or of calibration over the training set if larger.

    Per example a step holds about 10 activations or gradients of the hidden width, 10 of
    the vocabulary and 4 of the concatenated embedding (measured on CPU, generated backward,
    n_hidden 200: 6.9 KB an example in float32 against this formula's 9.5 KB), plus the
    int64 batch. Calibration holds the embedding and the hidden layer of every example.
    """
    item = 8 if config.dtype == "float64" else 4
    width = 10 * config.n_hidden + 10 * vocab_size + 4 * config.block_size * config.n_embd
    per_example = width * item + 8 * (config.block_size + 2)
    calibration = 2 * n_train * (config.block_size * config.n_embd + config.n_hidden) * item
    return max(config.batch_size * per_example, calibration)


def available_bytes() -> int | None:
    """Memory the OS can give without swapping (Linux MemAvailable); None when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(config: TrainConfig, vocab_size: int, n_train: int) -> None:
    """Refuse a run whose step would not fit, instead of being killed by the OS mid-run."""
    need, have = step_bytes(config, vocab_size, n_train), available_bytes()
    if have is not None and need > have:
        raise UsageError(
            f"--batch-size {config.batch_size} needs about {need / 2**30:.1f} GiB for one "
            f"step (an estimate), more than the {have / 2**30:.1f} GiB of memory available; "
            "use a smaller --batch-size"
        )


def given_options(args: argparse.Namespace, config_class: type) -> dict:
    """The run options given on this command line (argparse defaults them to None)."""
    given = {f.name: getattr(args, f.name) for f in fields(config_class)}
    return {k: v for k, v in given.items() if v is not None}


def resume_config(config: C, given: dict, step: int, resumable: set[str]) -> C:
    """The checkpoint's ``config`` with what ``resumable`` lets a resumed run change: any other
    option given with another value is refused, as is a step count below the checkpoint's."""
    clash = [k for k, v in given.items() if k not in resumable and v != getattr(config, k)]
    if clash:
        was = ", ".join(f"--{k.replace('_', '-')} {getattr(config, k)}" for k in clash)
        raise UsageError(f"the checkpoint's run used {was}; drop those options to resume it")
    config = replace(config, **{k: v for k, v in given.items() if k in resumable})
    if config.steps < step:
        raise UsageError(f"the checkpoint is at step {step}, past --steps {config.steps}")
    return config


RUN_GROUP = "run (stored in the checkpoint; --resume reuses them)"


def new_parser(
    prog: str, description: str, epilog: str
) -> tuple[argparse.ArgumentParser, argparse._ArgumentGroup]:
    """A model's parser and its group of run options (those a checkpoint stores)."""
    p = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return p, p.add_argument_group(RUN_GROUP)


def add_backward_option(run: argparse._ArgumentGroup, reference: str) -> None:
    """--backward: generated/ chained by hand (the default), or ``reference`` through autograd."""
    run.add_argument(
        "--backward",
        choices=BACKWARDS,
        help="generated: the hand-written loop over generated/ modules (default); autograd: "
        f"{reference} with loss.backward(), for comparison",
    )
