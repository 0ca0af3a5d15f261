"""``python -m train --model gpt``: options, then train (or resume) and report, or sample.

One process, or several under ``torchrun --nproc_per_node=K -m train --model gpt``. Errors a
user can fix print one line and exit 2; a diverged run exits 1; Ctrl-C saves a checkpoint and
exits 130, as the MLP's ``train.cli``.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields, replace
from pathlib import Path

import torch

from train import checkpoint, preflight
from train.cli import positive, positive_float, seed
from train.data import DATA_ENV, DataError, resolve_data_path
from train.device import add_device_options, check_device
from train.distributed import World, close_world, init_world
from train.gpt import loop
from train.gpt.config import BACKWARDS, GELUS, GPTConfig
from train.gpt.data import load_sequences
from train.gpt.finish import finish
from train.gpt.model import sample_names
from train.gpt.step import make_step
from train.loop import Diverged, Interrupted
from train.preflight import UsageError
from train.progress import Progress
from train.sample import sampler_seed

PROG = "python -m train --model gpt"
DEFAULTS = GPTConfig()
RESUMABLE = {"steps", "backward"}  # a resumed run may add steps or switch backward
EXIT_USAGE, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 1, 130

EPILOG = """examples:
  python -m train --model gpt                          makemore's GPT, 5,000 steps, runs/gpt
  python -m train --model gpt --resume                 continue after Ctrl-C
  python -m train --model gpt --sample 10              10 names from the saved model
  python -m train --model gpt --backward autograd --out runs/gpt-autograd
  torchrun --nproc_per_node=2 -m train --model gpt     the same run on two processes
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Train makemore's GPT on names with the backward chained by hand from\n"
        "generated/ (no loss.backward()). Defaults are makemore's.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d, run = DEFAULTS, p.add_argument_group("run (stored in the checkpoint; --resume reuses them)")
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
    run.add_argument("--backward", choices=BACKWARDS, help="generated (default) or torch autograd")
    p.add_argument("--data", metavar="PATH", help=f"one word per line (${DATA_ENV}, names.txt)")
    out = p.add_argument_group("output and control")
    out.add_argument("--out", metavar="DIR", default="runs/gpt", help="run folder (%(default)s)")
    out.add_argument("--checkpoint", metavar="PATH", help="checkpoint file (DIR/checkpoint.pt)")
    out.add_argument("--checkpoint-every", type=positive(), default=1000, metavar="N")
    out.add_argument("--resume", action="store_true", help="continue the run in the checkpoint")
    out.add_argument("--overwrite", action="store_true", help="start the checkpoint's run over")
    out.add_argument("--metrics", metavar="FILE", help="also write the metrics JSON here")
    out.add_argument("--sample", type=positive(), metavar="K", help="print K names and exit")
    out.add_argument("--threads", type=positive(), default=1, metavar="N", help="(%(default)s)")
    add_device_options(out)
    return p


def checkpoint_path(args: argparse.Namespace) -> Path:
    return Path(args.checkpoint) if args.checkpoint else Path(args.out) / "checkpoint.pt"


def resolve_config(args: argparse.Namespace, saved: dict | None) -> GPTConfig:
    """Options given now over the checkpoint's (when resuming) over the defaults."""
    given = {f.name: getattr(args, f.name) for f in fields(GPTConfig)}
    given = {k: v for k, v in given.items() if v is not None}
    if saved is None:
        config = GPTConfig(**given)
    else:
        config = GPTConfig.from_dict(saved["config"])
        clash = [k for k, v in given.items() if k not in RESUMABLE and v != getattr(config, k)]
        if clash:
            was = ", ".join(f"--{k.replace('_', '-')} {getattr(config, k)}" for k in clash)
            raise UsageError(f"the checkpoint's run used {was}; drop those options to resume it")
        config = replace(config, **{k: v for k, v in given.items() if k in RESUMABLE})
        if config.steps < saved["step"]:
            raise UsageError(
                f"the checkpoint is at step {saved['step']}, past --steps {config.steps}"
            )
    if config.n_embd % config.n_head:
        raise UsageError(f"--n-embd {config.n_embd} is not a multiple of --n-head {config.n_head}")
    return config


def start(args: argparse.Namespace, ckpt: Path, world: World, device: str) -> loop.Run:
    """A new run, or the checkpoint's, with its data loaded and checked; refusals come first."""
    preflight.check_options(args)
    saved = loop.load_checkpoint(ckpt) if args.resume else None
    if saved is None:
        preflight.check_new_run(args, ckpt, PROG)
    out = Path(args.out)
    preflight.check_outputs([out / "metrics.json", out / "loss.png"] + metrics_extra(args))
    config = resolve_config(args, saved)
    if config.batch_size % world.size:
        raise UsageError(
            f"--batch-size {config.batch_size} does not split over {world.size} processes"
        )
    stored = saved["data"]["path"] if saved else None
    data_arg = args.data or (stored if stored and Path(stored).is_file() else None)
    data_path = resolve_data_path(data_arg)
    data = load_sequences(data_path)
    if saved is None:
        return loop.new_run(config, data, str(data_path), device)
    if data.sha256 != saved["data"]["sha256"]:
        raise UsageError(f"{data_path} is not the data this checkpoint was trained on")
    return loop.restore_run(saved, config, data, str(data_path), device)


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
    log = sys.stdout if world.main else open(os.devnull, "w")  # noqa: SIM115 (closed below)
    print(describe(run, world, device, args.compile), file=log, flush=True)
    progress = Progress(
        run.config.steps, run.step, history=run.losses[-1000:], stream=None if world.main else log
    )
    step_fn = make_step(run.config, args.compile)
    try:
        try:
            loop.train(run, ckpt, args.checkpoint_every, progress, step_fn, world, device)
        finally:
            progress.close()
        if not world.main:
            return 0
        return 0 if finish(run, ckpt, Path(args.out), metrics_extra(args)) else EXIT_DIVERGED
    except Interrupted:
        try:
            loop.save(run, ckpt, world)
        except Diverged as exc:
            print(f"error: interrupted, and {exc}. {last_good(run, ckpt)}", file=sys.stderr)
            return EXIT_DIVERGED
        if world.main:
            print(f"interrupted at step {run.step:,}; saved {ckpt}", file=sys.stderr)
            print(f"resume with: {preflight.command(args, '--resume', PROG)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # a second Ctrl-C: stopped mid-step, so nothing is saved
        print(f"stopped without saving. {last_good(run, ckpt)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Diverged as exc:
        if world.main:
            print(f"error: training diverged: {exc}. {last_good(run, ckpt)}", file=sys.stderr)
            print("Try a smaller --lr.", file=sys.stderr)
        return EXIT_DIVERGED
    finally:
        if log is not sys.stdout:
            log.close()


def last_good(run: loop.Run, ckpt: Path) -> str:
    """The last checkpoint this run wrote or resumed from: never one of another run."""
    if run.saved_step is not None:
        return f"Kept the last good checkpoint {ckpt} (step {run.saved_step:,})."
    earlier = f"; {ckpt} still holds the earlier run" if ckpt.exists() else ""
    return f"No checkpoint of this run was written before that{earlier}."


def cmd_sample(args: argparse.Namespace, device: str) -> int:
    """Names from a saved run, without data or training; the sampler seed of a run's end."""
    saved = loop.load_checkpoint(checkpoint_path(args))
    config = GPTConfig.from_dict(saved["config"])
    g = torch.Generator().manual_seed(
        sampler_seed(args.seed if args.seed is not None else config.seed)
    )
    params = {k: v.to(device) for k, v in saved["params"].items()}
    names = sample_names(params, config, saved["chars"], saved["block_size"], args.sample, g)
    print("\n".join(names))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising for every expected failure."""
    args = build_parser().parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    world = World()
    try:
        device = check_device(args.device, int(os.environ.get("LOCAL_RANK", "0")))
        if args.sample:
            return cmd_sample(args, device)
        world = init_world(device)
        return cmd_train(args, world, device)
    except (DataError, checkpoint.CheckpointError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted; nothing was saved", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        close_world(world)
        torch.set_num_threads(threads)  # main() may be called in-process (tests)
