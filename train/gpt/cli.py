"""``python -m train --model gpt``: options, then train (or resume) and report, or sample.

One process, or several under ``torchrun --nproc_per_node=K -m train --model gpt``. Errors a
user can fix print one line and exit 2; a diverged run exits 1; Ctrl-C saves a checkpoint and
exits 130, as the MLP's ``train.cli``.
"""

from __future__ import annotations

import argparse
import io
import os
from pathlib import Path

import torch

from train import checkpoint, preflight
from train.cli import MAX_SAMPLE, MAX_THREADS, positive, positive_float, seed
from train.data import DATA_ENV, DataError, resolve_data_path
from train.device import add_device_options, check_device
from train.distributed import World, close_world, init_world
from train.engine import guarded, session
from train.gpt import loop
from train.gpt.config import GELUS, GPTConfig
from train.gpt.data import load_sequences
from train.gpt.finish import finish
from train.gpt.model import sample_names
from train.gpt.step import make_step
from train.preflight import UsageError
from train.progress import Progress
from train.sample import sampler_seed

PROG = "python -m train --model gpt"
DEFAULTS = GPTConfig()
RESUMABLE = {"steps", "backward"}  # a resumed run may add steps or switch backward

DESCRIPTION = """Train makemore's GPT on names with the backward chained by hand from
generated/ (no loss.backward()). Defaults are makemore's."""
EPILOG = """examples:
  python -m train --model gpt                          makemore's GPT, 5,000 steps, runs/gpt
  python -m train --model gpt --resume                 continue after Ctrl-C
  python -m train --model gpt --sample 10              10 names from the saved model
  python -m train --model gpt --backward autograd --out runs/gpt-autograd
  torchrun --nproc_per_node=2 -m train --model gpt     the same run on two processes
"""


def build_parser() -> argparse.ArgumentParser:
    p, run = preflight.new_parser(PROG, DESCRIPTION, EPILOG)
    d = DEFAULTS
    run.add_argument("--steps", type=positive(), metavar="N", help=f"({d.steps:,})")
    run.add_argument("--seed", type=seed, metavar="N", help=f"seed of init and batches ({d.seed})")
    run.add_argument("--lr", type=positive_float, metavar="X", help=f"AdamW, constant ({d.lr})")
    run.add_argument("--weight-decay", type=float, metavar="X", help=f"({d.weight_decay})")
    run.add_argument("--batch-size", type=positive(), metavar="N", help=f"global ({d.batch_size})")
    run.add_argument("--n-layer", type=positive(), metavar="N", help=f"({d.n_layer})")
    run.add_argument("--n-head", type=positive(), metavar="N", help=f"({d.n_head})")
    run.add_argument("--n-embd", type=positive(), metavar="N", help=f"({d.n_embd})")
    run.add_argument("--gelu", choices=GELUS, help=f"tanh: makemore's NewGELU ({d.gelu})")
    run.add_argument("--dtype", choices=("float32", "float64"), help=f"({d.dtype})")
    preflight.add_backward_option(run, "the same model in plain torch ops")
    p.add_argument("--data", metavar="PATH", help=f"one word per line (${DATA_ENV}, names.txt)")
    out = p.add_argument_group("output and control")
    out.add_argument("--out", metavar="DIR", default="runs/gpt", help="run folder (%(default)s)")
    out.add_argument("--checkpoint", metavar="PATH", help="checkpoint file (DIR/checkpoint.pt)")
    out.add_argument("--checkpoint-every", type=positive(), default=1000, metavar="N")
    out.add_argument("--resume", action="store_true", help="continue the run in the checkpoint")
    out.add_argument("--overwrite", action="store_true", help="start the checkpoint's run over")
    out.add_argument("--metrics", metavar="FILE", help="also write the metrics JSON here")
    out.add_argument(
        "--sample", type=positive(1, MAX_SAMPLE), metavar="K", help="print K names and exit"
    )
    out.add_argument(
        "--threads", type=positive(1, MAX_THREADS), default=1, metavar="N", help="(%(default)s)"
    )
    add_device_options(out)
    return p


def checkpoint_path(args: argparse.Namespace) -> Path:
    return Path(args.checkpoint) if args.checkpoint else Path(args.out) / "checkpoint.pt"


def resolve_config(args: argparse.Namespace, saved: dict | None) -> GPTConfig:
    """Options given now over the checkpoint's (when resuming) over the defaults."""
    given = preflight.given_options(args, GPTConfig)
    if saved is None:
        config = GPTConfig(**given)
    else:
        config = GPTConfig.from_dict(saved["config"])
        config = preflight.resume_config(config, given, saved["step"], RESUMABLE)
    if config.n_embd % config.n_head:
        raise UsageError(f"--n-embd {config.n_embd} is not a multiple of --n-head {config.n_head}")
    return config


def start(args: argparse.Namespace, ckpt: Path, world: World, device: str) -> loop.Run:
    """A new run, or the checkpoint's, with its data loaded and checked; refusals come first."""
    preflight.check_options(args)
    preflight.check_run_paths(args, ckpt, "loss.png")
    saved = loop.load_checkpoint(ckpt) if args.resume else None
    if saved is None:
        preflight.check_new_run(args, ckpt, PROG)
    config = checkpoint.usable(ckpt, lambda: resolve_config(args, saved), saved)
    preflight.check_numbers(config)
    if config.batch_size % world.size:
        raise UsageError(
            f"--batch-size {config.batch_size} does not split over {world.size} processes"
        )
    stored = saved["data"]["path"] if saved else None
    data_arg = args.data or (stored if stored and Path(stored).is_file() else None)
    data_path = resolve_data_path(data_arg)
    data = load_sequences(data_path)
    check_memory(config, len(data.chars), data.block_size)
    if saved is None:
        return loop.new_run(config, data, str(data_path), device)
    if data.sha256 != saved["data"]["sha256"]:
        raise UsageError(f"{data_path} is not the data this checkpoint was trained on")
    restore = lambda: loop.restore_run(saved, config, data, str(data_path), device)  # noqa: E731
    return checkpoint.usable(ckpt, restore)


def check_memory(config: GPTConfig, vocab: int, block: int) -> None:
    """Refuse a model or batch that would not fit, before its parameters are allocated.

    In items of the dtype: parameters with their gradients, AdamW's two moments and the
    float64 draw of the initialisation (~6 per parameter); per position of a batch about 20
    activations of width n_embd per layer, the attention weights (3 per head per position it
    sees) and 3 of the vocabulary. An estimate, as the MLP's ``preflight.step_bytes``.
    """
    C, L, H = config.n_embd, config.n_layer, config.n_head
    n_params = 2 * vocab * C + block * C + L * (12 * C * C + 13 * C) + 2 * C
    per_position = L * (20 * C + 3 * H * block) + 3 * vocab
    item = 8 if config.dtype == "float64" else 4
    need = (6 * n_params + config.batch_size * block * per_position) * item
    what = f"--n-layer {L} --n-embd {C} --batch-size {config.batch_size}"
    preflight.check_fits(need, what, "use a smaller model or --batch-size")


def metrics_extra(args: argparse.Namespace) -> list[Path]:
    return [Path(args.metrics)] if args.metrics else []


def describe(run: loop.Run, world: World, device: str, compiled: bool) -> str:
    c, d = run.config, run.data
    n_params = sum(p.numel() for p in run.params.values())
    where = f"{device}" + (f", {world.size} processes" if world.size > 1 else "")
    return (
        f"GPT: {c.n_layer} layers, {c.n_head} heads, n_embd {c.n_embd}, block size "
        f"{d.block_size}, vocabulary {len(d.chars)}: {n_params:,} parameters\n"
        f"words train {len(d.Y_train):,} / val {len(d.Y_val):,} / test {len(d.Y_test):,}\n"
        f"backward {c.backward}{' (compiled)' if compiled else ''}, {c.dtype}, {where}, AdamW "
        f"lr {c.lr:g} wd {c.weight_decay:g}, batch {c.batch_size}, steps {run.step:,} -> "
        f"{c.steps:,}"
    )


def cmd_train(args: argparse.Namespace, world: World, device: str) -> int:
    ckpt = checkpoint_path(args)
    run = start(args, ckpt, world, device)
    if world.main:
        print(describe(run, world, device, args.compile), flush=True)
    quiet = None if world.main else io.StringIO()  # ranks other than 0 show no progress
    progress = Progress(run.config.steps, run.step, quiet, history=run.losses[-1000:])
    step_fn = make_step(run.config, args.compile)

    return session(
        run,
        ckpt,
        lambda: loop.train(run, ckpt, args.checkpoint_every, progress, step_fn, world, device),
        progress,
        lambda: loop.save(run, ckpt, world),
        lambda: finish(run, ckpt, Path(args.out), metrics_extra(args)) if world.main else True,
        preflight.command(args, "--resume", launcher(world)),
        speak=world.main,
    )


def launcher(world: World) -> str:
    """How this run was started, for the resume hint: torchrun with as many processes."""
    if world.size == 1:
        return PROG
    return f"torchrun --nproc_per_node={world.size} -m train --model gpt"


def cmd_sample(args: argparse.Namespace, device: str) -> int:
    """Names from a saved run, without data or training; the sampler seed of a run's end."""
    ckpt = checkpoint_path(args)
    saved = loop.load_checkpoint(ckpt)

    def names() -> list[str]:
        config = GPTConfig.from_dict(saved["config"])
        g = torch.Generator().manual_seed(
            sampler_seed(args.seed if args.seed is not None else config.seed)
        )
        params = {k: v.to(device) for k, v in saved["params"].items()}
        return sample_names(params, config, saved["chars"], saved["block_size"], args.sample, g)

    print("\n".join(checkpoint.usable(ckpt, names)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising for every expected failure."""
    args = build_parser().parse_args(argv)
    errors = (DataError, checkpoint.CheckpointError, UsageError)
    return guarded(args.threads, lambda: dispatch(args), errors)


def dispatch(args: argparse.Namespace) -> int:
    """Sample, or train on this process's share of the world ``torchrun`` describes."""
    device = check_device(args.device, int(os.environ.get("LOCAL_RANK", "0")))
    if args.sample:
        return cmd_sample(args, device)
    world = init_world(device)
    try:
        return cmd_train(args, world, device)
    finally:
        close_world(world)
