"""What every model's training run shares: its state, new or restored, the step loop,
checkpoints, Ctrl-C and divergence.

A model's spec (``train.models``) says how to build its run, take one step and report its end;
the loop around the step, the checkpoint's cadence and shared contents and the Ctrl-C handling
are these (the exit codes and messages of every way a run ends: ``train.exits``). Everything
random comes from one ``torch.Generator`` (init, then one minibatch draw per step), and a
checkpoint holds its state with the parameters, optimizer state, step and loss history, so a
resumed run takes exactly the steps an uninterrupted one would.
"""

from __future__ import annotations

import argparse
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from train import checkpoint
from train.device import to_cpu
from train.distributed import World
from train.progress import Progress

if TYPE_CHECKING:
    from train.models import ModelSpec

T = TypeVar("T")


class Interrupted(Exception):
    """Ctrl-C arrived; raised between steps, so the state is a whole number of steps."""


class Diverged(Exception):
    """The loss or the parameters stopped being finite; nothing after the last good step is kept."""

    def __init__(self, step: int, what: str) -> None:
        super().__init__(f"{what} at step {step}")
        self.step = step


@dataclass
class RunState:
    """A run in progress: config, data, parameters, optimizer, the generator that draws every
    batch, and what changes step by step. A model's ``Run`` may add its own fields."""

    config: Any
    data: Any
    params: dict[str, torch.Tensor]
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    step: int = 0
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0  # in the steps themselves over all sessions; not checkpoints
    saved_step: int | None = None  # step of the last good checkpoint of this run, if any


@dataclass(frozen=True)
class Job:
    """One ``python -m train`` command: its options, checkpoint file, device and processes."""

    args: argparse.Namespace
    ckpt: Path
    device: str = "cpu"
    world: World = World()

    @property
    def out(self) -> Path:
        return Path(self.args.out)

    @property
    def metrics_paths(self) -> list[Path]:
        """The run's metrics.json, and ``--metrics``'s copy."""
        return [self.out / "metrics.json"] + (
            [Path(self.args.metrics)] if self.args.metrics else []
        )


# --- a run: new, restored, saved ------------------------------------------------------------


def new_run(spec: ModelSpec, config: Any, data: Any, args: argparse.Namespace) -> RunState:
    """Fresh parameters from the seeded generator; the same generator then draws the batches."""
    g = torch.Generator().manual_seed(config.seed)
    params = spec.init(config, data, g)
    optimizer = spec.make_optimizer(config, params)
    return spec.run(config, data, params, optimizer, g, **spec.run_fields(args, None))


def restore_run(
    spec: ModelSpec, saved: dict, config: Any, data: Any, args: argparse.Namespace
) -> RunState:
    """The checkpoint's run, where it stopped (parameters in the optimizer's order)."""
    names = spec.checkpoint_shapes(config, saved)
    params = {name: saved["params"][name].to(config.torch_dtype) for name in names}
    optimizer = spec.make_optimizer(config, params)
    optimizer.load_state_dict(saved["optimizer"])
    g = torch.Generator()
    g.set_state(saved["generator"])
    at, losses, seconds = saved["step"], saved["losses"].tolist(), float(saved.get("seconds", 0))
    extra = spec.run_fields(args, saved)
    return spec.run(config, data, params, optimizer, g, at, losses, seconds, at, **extra)


def state_payload(run: RunState) -> dict:
    """What every checkpoint holds of a run, on the CPU as plain tensors and builtins (so it
    loads with ``weights_only`` on any machine); ``Diverged`` rather than anything not finite."""
    check_finite(run)
    return {
        "config": run.config.as_dict(),
        "step": run.step,
        "params": {k: v.detach().cpu().clone() for k, v in run.params.items()},
        "optimizer": to_cpu(run.optimizer.state_dict()),
        "generator": run.generator.get_state(),
        "losses": torch.tensor(run.losses, dtype=torch.float64),
        "seconds": run.seconds,
    }


def snapshot(spec: ModelSpec, run: RunState, periodic: bool = False) -> dict:
    """Everything a resumed run or ``--sample`` needs: the shared state, then the model's own
    fields. Raises ``Diverged`` rather than return anything not finite."""
    payload = state_payload(run)  # checks the parameters and optimizer state first
    tag = {"model": spec.tag} if spec.tag else {}
    return {**payload, **tag, **spec.checkpoint_fields(run, periodic)}


def save(spec: ModelSpec, run: RunState, job: Job, periodic: bool = False) -> dict:
    """Checkpoint the run (rank 0 writes; every rank checks, so all agree on ``Diverged``);
    afterwards it is the run's last good checkpoint."""
    payload = snapshot(spec, run, periodic)
    if job.world.main:
        checkpoint.save(job.ckpt, payload)
    run.saved_step = run.step
    return payload


def load_checkpoint(spec: ModelSpec, path: Path) -> dict:
    """A checkpoint of ``spec``'s model: its keys, types and parameter shapes, then its digest."""

    def check_params(path: Path, payload: dict) -> None:
        try:
            config = spec.config.from_dict(payload["config"])
            shapes = spec.checkpoint_shapes(config, payload)
        except (KeyError, TypeError):
            raise checkpoint.CheckpointError(f"checkpoint {path} has no usable config") from None
        checkpoint.check_shapes(path, payload["params"], shapes)

    return checkpoint.verified(path, spec.tag, spec.fields, spec.data_keys, check_params)


# --- the loop -------------------------------------------------------------------------------


@contextmanager
def ctrl_c_between_steps(patient: bool = False) -> Iterator[Callable[[], bool]]:
    """Turn the first Ctrl-C (SIGINT) or SIGTERM into a flag the loop checks after each step.

    A KeyboardInterrupt raised mid-update could leave some parameters stepped and others not;
    deferring it to the step boundary keeps every checkpoint exact; SIGTERM (``kill``, a job
    scheduler's stop) saves the same way instead of ending the process unsaved. A second signal
    raises at once, for when the user really wants out, unless ``patient``: under ``torchrun``
    a worker gets the terminal's SIGINT and then the one torchrun forwards (or its SIGTERM),
    and must still reach the step boundary and save; torchrun kills it 30 s later if it hangs.
    """
    hit = []

    def handler(signum: int, frame: object) -> None:
        if hit and not patient:
            raise KeyboardInterrupt
        hit.append(signum)

    if threading.current_thread() is not threading.main_thread():
        yield lambda: False  # signal handlers can only be set from the main thread
        return
    signums = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, handler) for s in signums}
    try:
        yield lambda: bool(hit)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_steps(
    run: RunState,
    take_step: Callable[[Callable[[], bool]], bool],
    after_step: Callable[[], None],
    save: Callable[[], None],
    checkpoint_every: int,
    patient: bool = False,
) -> None:
    """Step until ``config.steps``; save every ``checkpoint_every`` steps and at the end.

    ``take_step(interrupted)`` runs one whole step (timed into ``run.seconds``) and returns
    whether to stop after it: ``interrupted()`` itself, or, on several processes, whether any
    of them was. ``after_step`` (progress, monitoring) is not timed. Raises ``Interrupted``
    after the step that saw Ctrl-C (the caller saves); ``Diverged`` passes through unsaved.
    """
    with ctrl_c_between_steps(patient) as interrupted:
        while run.step < run.config.steps:
            started = time.perf_counter()
            stop = take_step(interrupted)
            run.seconds += time.perf_counter() - started
            after_step()
            if run.step % checkpoint_every == 0 or run.step == run.config.steps:
                save()
            if stop:
                raise Interrupted


def train(spec: ModelSpec, run: RunState, job: Job, progress: Progress) -> None:
    """Step until ``config.steps``; checkpoint every ``--checkpoint-every`` steps and at the end.

    Raises ``Interrupted`` after Ctrl-C on any process (all stop at the same step; the caller
    saves) and ``Diverged`` on a non-finite loss, before that step's update and without saving,
    so the last checkpoint stays good.
    """
    step = spec.make_step(run.config)
    if job.args.compile:
        step = torch.compile(step)
    take_step, after_step = spec.trainer(run, step, job, progress)
    run_steps(
        run,
        take_step,
        after_step or (lambda: progress.update(run.step, run.losses[-1])),
        lambda: save(spec, run, job, periodic=True),
        job.args.checkpoint_every,
        patient=job.world.size > 1,
    )


def draw(run: RunState, n: int) -> torch.Tensor:
    """The indices of one minibatch of the ``n`` training examples, from the run's generator."""
    return torch.randint(0, n, (run.config.batch_size,), generator=run.generator)


def apply_update(
    run: RunState, grads: dict[str, torch.Tensor], inspect: Callable[[], T] | None = None
) -> T | None:
    """Hand the gradients to the optimizer through ``.grad`` at this step's learning rate.

    ``inspect()`` runs with the gradients in ``.grad`` and before the update (clipping and
    monitoring, the classifier's); what it returns is returned.
    """
    for group in run.optimizer.param_groups:
        group["lr"] = run.config.lr_at(run.step)
    for name, p in run.params.items():
        p.grad = grads[name]
    seen = inspect() if inspect else None
    run.optimizer.step()
    for p in run.params.values():
        p.grad = None
    return seen


def advance(run: RunState, loss: float, grads: dict[str, torch.Tensor]) -> None:
    """Update with ``grads`` and count the step; a non-finite loss raises ``Diverged`` first,
    so the parameters stay those of the last good step (steps count from 1 in the message)."""
    check_loss(run, loss)
    apply_update(run, grads)
    run.losses.append(loss)
    run.step += 1


def check_loss(run: RunState, loss: float) -> None:
    if not math.isfinite(loss):
        raise Diverged(run.step + 1, f"the loss is {loss}")


def check_finite(run: RunState) -> None:
    """Raise ``Diverged`` for a parameter or optimizer state that is not finite: no checkpoint
    ever holds one."""
    for name, p in run.params.items():
        if not torch.isfinite(p).all():
            raise Diverged(run.step, f"parameter {name} is not finite")
    for state in run.optimizer.state.values():
        if any(torch.is_tensor(v) and not torch.isfinite(v).all() for v in state.values()):
            raise Diverged(run.step, "the optimizer state is not finite")


# --- how a run ends -----------------------------------------------------------------------------


def finish(spec: ModelSpec, run: RunState, job: Job) -> bool:
    """The final checkpoint, then the model's report; False when its loss is not finite."""
    return spec.finish(run, save(spec, run, job), job)
