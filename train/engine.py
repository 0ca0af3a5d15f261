"""What every model's training run shares: its state, the step loop, Ctrl-C, divergence, and
the way a session ends (finished, interrupted and saved, stopped, diverged).

The MLP (``train.loop``), the digit classifier (``train.classifier.loop``) and the GPT
(``train.gpt.loop``) differ in their data, their step and what they store; the loop around
the step, the checkpoint cadence, the Ctrl-C handling and the exit codes are these.
"""

from __future__ import annotations

import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from train.device import to_cpu

EXIT_USAGE, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 1, 130


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
    batch, and what changes step by step. Each model's ``Run`` adds its own fields."""

    config: Any
    data: Any
    params: dict[str, torch.Tensor]
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    step: int = 0
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0  # in the steps themselves over all sessions; not checkpoints
    saved_step: int | None = None  # step of the last good checkpoint of this run, if any


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


def apply_update(run: RunState, grads: dict[str, torch.Tensor]) -> None:
    """Hand the gradients to the optimizer through ``.grad`` at this step's learning rate."""
    for group in run.optimizer.param_groups:
        group["lr"] = run.config.lr_at(run.step)
    for name, p in run.params.items():
        p.grad = grads[name]
    run.optimizer.step()
    for p in run.params.values():
        p.grad = None


def advance(run: RunState, loss: float, grads: dict[str, torch.Tensor]) -> None:
    """Update with ``grads`` and count the step; a non-finite loss raises ``Diverged`` first,
    so the parameters stay those of the last good step (steps count from 1 in the message)."""
    if not math.isfinite(loss):
        raise Diverged(run.step + 1, f"the loss is {loss}")
    apply_update(run, grads)
    run.losses.append(loss)
    run.step += 1


def check_finite(run: RunState) -> None:
    """Raise ``Diverged`` for a parameter or optimizer state that is not finite: no checkpoint
    ever holds one."""
    for name, p in run.params.items():
        if not torch.isfinite(p).all():
            raise Diverged(run.step, f"parameter {name} is not finite")
    for state in run.optimizer.state.values():
        if any(torch.is_tensor(v) and not torch.isfinite(v).all() for v in state.values()):
            raise Diverged(run.step, "the optimizer state is not finite")


def last_good(run: RunState, ckpt: Path) -> str:
    """The last checkpoint this run wrote or resumed from: never one of another run."""
    if run.saved_step is not None:
        return f"Kept the last good checkpoint {ckpt} (step {run.saved_step:,})."
    earlier = f"; {ckpt} still holds the earlier run" if ckpt.exists() else ""
    return f"No checkpoint of this run was written before that{earlier}."


def session(
    run: RunState,
    ckpt: Path,
    train: Callable[[], None],
    progress: Any,
    save: Callable[[], None],
    finish: Callable[[], bool],
    resume_hint: str,
    advice: str = "Try a smaller --lr.",
    speak: bool = True,
) -> int:
    """Train, then finish; the exit code and one-line messages of every way a run ends.

    0 finished, 1 diverged (the last good checkpoint kept and named), 130 interrupted: the
    first Ctrl-C saves at the step boundary and says how to resume, a second stops at once
    without saving. ``speak`` False (ranks other than 0) keeps quiet about all of it. The
    ``progress`` line is closed before any message.
    """
    say = (lambda text: print(text, file=sys.stderr)) if speak else (lambda text: None)
    try:
        try:
            train()
        finally:
            progress.close()
        return 0 if finish() else EXIT_DIVERGED
    except Interrupted:
        try:
            save()
        except Diverged as exc:
            say(f"error: interrupted, and {exc}. {last_good(run, ckpt)}")
            return EXIT_DIVERGED
        except OSError as exc:
            say(f"error: interrupted, and {cannot_write(exc)}. {last_good(run, ckpt)}")
            return EXIT_DIVERGED
        say(f"interrupted at step {run.step:,}; saved {ckpt}")
        say(f"resume with: {resume_hint}")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # a second Ctrl-C: stopped mid-step, so nothing is saved
        say(f"stopped without saving. {last_good(run, ckpt)}")
        return EXIT_INTERRUPTED
    except Diverged as exc:
        say(f"error: training diverged: {exc}. {last_good(run, ckpt)}")
        say(advice)
        return EXIT_DIVERGED
    except OSError as exc:  # a full disk or a folder gone read-only mid-run
        say(f"error: {cannot_write(exc)}. {last_good(run, ckpt)}")
        return EXIT_DIVERGED


def cannot_write(exc: OSError) -> str:
    """An OSError as a phrase naming its file: 'cannot write X: No space left on device'."""
    where = f" {exc.filename}" if exc.filename else ""
    return f"cannot write{where}: {exc.strerror or exc}"


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


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM outside the step loop (loading data, the final report) stops the run as Ctrl-C
    does, through the same messages, instead of ending the process mid-write."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def guarded(threads: int, body: Callable[[], int], errors: tuple[type[Exception], ...]) -> int:
    """Run a CLI's ``body`` on ``threads`` torch threads; ``errors`` (a user can fix them) are
    one line and exit 2, a Ctrl-C outside the loop exit 130 with nothing saved. The thread
    count is restored after, since tests call the CLIs in-process."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with sigterm_as_ctrl_c():
            return body()
    except errors as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # writing outside the loop: a full disk, a read-only folder
        print(f"error: {cannot_write(exc)}", file=sys.stderr)
        return EXIT_DIVERGED
    except KeyboardInterrupt:
        print("interrupted; nothing was saved", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        torch.set_num_threads(before)
