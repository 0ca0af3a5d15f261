"""``python -m train``: the options every model shares and the chosen model's own; then train (or
resume) and report, or sample names from a checkpoint.

``--model mlp`` (the default), ``classifier`` or ``gpt`` (``train.models``) is taken out of the
command line before the model's parser reads the rest. Errors a user can fix (data, checkpoint,
options) print one line and exit 2; a diverged run exits 1; Ctrl-C saves a checkpoint and exits
130, the shell's code for SIGINT (``train.exits``). The GPT also trains on several processes
under ``torchrun --nproc_per_node=K -m train --model gpt``.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from pathlib import Path

import torch

from train import checkpoint, engine, models, preflight
from train.config import BACKWARDS, DTYPES, SEED_LIMIT, sampler_seed
from train.data import DATA_ENV, DataError
from train.device import add_device_options, check_device, move_run
from train.distributed import World, close_world, init_world
from train.engine import Job, RunState
from train.exits import EXIT_USAGE, guarded, session
from train.models import MODELS, ModelSpec, OptionGroups
from train.preflight import UsageError

MAX_SAMPLE = 10_000  # names one --sample prints; the GPT draws them all in one batch
MAX_THREADS = 1024  # torch takes any count, then overflows (2**40) or starts them all
ERRORS = (DataError, checkpoint.CheckpointError, UsageError)  # one line, exit 2


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


# --- the command line -------------------------------------------------------------------------


def pick_model(argv: list[str]) -> tuple[str | None, list[str]]:
    """The value of ``--model X`` / ``--model=X`` (None when absent) and the other arguments."""
    rest, model, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--model":
            model = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
            continue
        if arg.startswith("--model="):
            model = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return model, rest


def build_parser(spec: ModelSpec) -> argparse.ArgumentParser:
    """The options every model takes, then the model's own (``spec.options``)."""
    p = argparse.ArgumentParser(
        prog=spec.prog,
        description=spec.about,
        epilog=spec.examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    groups = OptionGroups(
        p.add_argument_group(
            "run (stored in the checkpoint; --resume reuses them, but --steps and --backward)"
        ),
        p.add_argument_group("data"),
        p.add_argument_group("output and control"),
    )
    add_run_options(groups.run, spec)
    add_output_options(groups.out, spec)
    spec.options(groups)
    return p


def add_run_options(run: argparse._ArgumentGroup, spec: ModelSpec) -> None:
    """Defaults are None so a resumed run can tell options given now from defaults."""
    d = spec.config()
    steps = f"steps ({d.steps:,}); on --resume, more extends the run"
    run.add_argument("--steps", type=positive(), metavar="N", help=steps)
    run.add_argument("--seed", type=seed, metavar="N", help=f"seed of init and batches ({d.seed})")
    batch = positive(spec.min_batch)
    run.add_argument("--batch-size", type=batch, metavar="N", help=f"({d.batch_size})")
    run.add_argument("--dtype", choices=sorted(DTYPES), help=f"parameter dtype ({d.dtype})")
    run.add_argument(
        "--backward",
        choices=BACKWARDS,
        help="generated: the hand-written loop over generated/ modules (default); autograd: "
        f"{spec.autograd} with loss.backward(), for comparison",
    )


def add_output_options(out: argparse._ArgumentGroup, spec: ModelSpec) -> None:
    out.add_argument("--out", metavar="DIR", default=spec.out, help="run folder (%(default)s)")
    out.add_argument("--checkpoint", metavar="PATH", help="checkpoint file (DIR/checkpoint.pt)")
    every = spec.checkpoint_every
    out.add_argument(
        "--checkpoint-every", type=positive(), default=every, metavar="N", help="(%(default)s)"
    )
    out.add_argument("--resume", action="store_true", help="continue the run in the checkpoint")
    out.add_argument(
        "--overwrite",
        action="store_true",
        help="start over the run in the checkpoint (only ever replaces a backgen checkpoint)",
    )
    out.add_argument("--metrics", metavar="FILE", help="also write the metrics JSON here")
    if spec.sample:
        out.add_argument(
            "--sample", type=positive(1, MAX_SAMPLE), metavar="K", help="print K names and exit"
        )
    out.add_argument(
        "--threads",
        type=positive(1, MAX_THREADS),
        default=1,
        metavar="N",
        help="torch CPU threads (%(default)s): small batches gain little from more, and two "
        "threads run 4x slower when another process holds one of the cores",
    )
    add_device_options(out)


def add_names_data(data: argparse._ArgumentGroup) -> None:
    """--data for the models that read the names (the MLP, the GPT)."""
    data.add_argument(
        "--data",
        metavar="PATH",
        help="a text file with one word per line; the vocabulary is '.' plus the file's sorted "
        f"characters. Default: ${DATA_ENV}, else the makemore names.txt, downloaded to data/ "
        "and checked against its sha256",
    )


def checkpoint_path(args: argparse.Namespace) -> Path:
    return Path(args.checkpoint) if args.checkpoint else Path(args.out) / "checkpoint.pt"


# --- the commands -----------------------------------------------------------------------------


def start(spec: ModelSpec, job: Job) -> RunState:
    """A new run, or the checkpoint's run when resuming, with its data loaded and checked.

    Every refusal comes before the first step: clashing flags, a file the run may not
    replace, data that is not the checkpoint's, a model or batch that would not fit in memory.
    """
    args, ckpt = job.args, job.ckpt
    preflight.check_options(args)
    preflight.check_run_paths(args, ckpt, spec.figure)
    saved = engine.load_checkpoint(spec, ckpt) if args.resume else None
    if saved is None:
        out = Path(args.out)
        preflight.check_new_run(args, ckpt, spec, (out / "metrics.json", out / spec.figure))
    config = checkpoint.usable(ckpt, lambda: spec.resolve_config(args, saved), saved)
    preflight.check_numbers(config)
    if config.batch_size % job.world.size:
        raise UsageError(
            f"--batch-size {config.batch_size} does not split over {job.world.size} processes"
        )
    data = spec.load_data(args, config, saved)
    spec.check_memory(config, data)
    if saved is None:
        return engine.new_run(spec, config, data, args)
    if data.sha256 != saved["data"]["sha256"]:
        stored = saved["data"].get("path")
        raise UsageError(
            f"{data.source} is not the data this checkpoint was trained on"
            + (f" ({stored}): pass that file as --data" if stored else "")
        )
    return checkpoint.usable(ckpt, lambda: engine.restore_run(spec, saved, config, data, args))


def cmd_train(spec: ModelSpec, job: Job) -> int:
    """Train (on this process's share of the world) and report; rank 0 alone speaks."""
    run = start(spec, job)
    move_run(run, job.device)
    main = job.world.main
    if main:
        print(spec.describe(run, job), flush=True)
    quiet = None if main else io.StringIO()  # ranks other than 0 show no progress
    progress = spec.progress(run.config.steps, run.step, quiet, history=run.losses[-1000:])
    return session(
        run,
        job.ckpt,
        lambda: engine.train(spec, run, job, progress),
        progress,
        lambda: engine.save(spec, run, job),
        lambda: engine.finish(spec, run, job) if main else True,
        preflight.command(job.args, "--resume", spec, launcher(spec, job.world)),
        spec.advice,
        speak=main,
        meet=job.world.meet,
    )


def launcher(spec: ModelSpec, world: World) -> str:
    """How a run on several processes was started, for the resume hint ("": one process)."""
    if world.size == 1:
        return ""
    return f"torchrun --nproc_per_node={world.size} -m train --model {spec.name}"


def cmd_sample(spec: ModelSpec, args: argparse.Namespace, device: str) -> int:
    """Names from a saved run, without training; the same sampler seed as a run's end. A
    training option given beside ``--sample`` is refused: the checkpoint's run is what samples
    (``--sample 2 --n-hidden 50 --steps 99 --overwrite`` ignored all three; found by probing)."""
    given = sorted(set(preflight.given_options(args, spec.config)) - {"seed"})
    flags = [f"--{name.replace('_', '-')}" for name in given]
    flags += [f"--{name}" for name in ("overwrite", "resume", "compile") if getattr(args, name, 0)]
    flags += ["--metrics"] if getattr(args, "metrics", None) else []
    if flags:
        raise UsageError(
            f"--sample prints names from the checkpoint's run and trains nothing: "
            f"{', '.join(flags)} would be ignored; drop {'it' if len(flags) == 1 else 'them'}"
        )
    ckpt = checkpoint_path(args)
    saved = engine.load_checkpoint(spec, ckpt)

    def names() -> list[str]:
        config = spec.config.from_dict(saved["config"])
        g = torch.Generator().manual_seed(
            sampler_seed(args.seed if args.seed is not None else config.seed)
        )
        return spec.sample(saved, config, args, device, g)

    print("\n".join(checkpoint.usable(ckpt, names)))
    return 0


def dispatch(spec: ModelSpec, args: argparse.Namespace) -> int:
    """Sample, or train on this process's share of the world ``torchrun`` describes."""
    device = check_device(args.device, int(os.environ.get("LOCAL_RANK", "0")))
    if getattr(args, "sample", None):
        return cmd_sample(spec, args, device)
    world = init_world(device) if spec.distributed else World()
    try:
        return cmd_train(spec, Job(args, checkpoint_path(args), device, world))
    finally:
        close_world(world)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising for every expected failure."""
    name, rest = pick_model(list(sys.argv[1:] if argv is None else argv))
    if name is not None and name not in MODELS:
        print(
            f"error: unknown --model {name!r}; choose one of {', '.join(MODELS)}", file=sys.stderr
        )
        return EXIT_USAGE
    if name is None and {"-h", "--help"} & set(rest):
        print(
            "(python -m train --model classifier --help: the MLP digit classifier;\n"
            " python -m train --model gpt --help: makemore's GPT)\n"
        )
    spec = models.spec(name or MODELS[0])
    args = build_parser(spec).parse_args(rest)
    return guarded(args.threads, lambda: dispatch(spec, args), ERRORS)
