"""How a ``python -m train`` command ends: its exit code and its one line.

0 finished; 1 diverged or could not write (the last good checkpoint kept and named); 2 a mistake
the user can fix (options, data, checkpoint), said before anything trains; 130 interrupted (the
first Ctrl-C or SIGTERM saves at the step boundary and says how to resume, a second stops at
once without saving).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from train.engine import Diverged, Interrupted, RunState

EXIT_USAGE, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 1, 130


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
    meet: Callable[[], None] = lambda: None,
) -> int:
    """Train, then finish; the exit code and one-line messages of every way a run ends.

    0 finished, 1 diverged (the last good checkpoint kept and named), 130 interrupted: the
    first Ctrl-C saves at the step boundary and says how to resume, a second stops at once
    without saving. ``speak`` False (ranks other than 0) keeps quiet about all of it. The
    ``progress`` line is closed before any message.

    ``meet`` (on several processes, a barrier) runs last when the step loop ended the same
    way on every process: at the last step, at the step after a Ctrl-C, or at the step
    whose all-reduced loss diverged. It lets no process exit while rank 0 still writes its
    report or checkpoint: a rank that left early was seen to die in gloo's teardown
    (SIGABRT) after a finished run, and torchrun then called the run failed. A loop left
    on one process alone (rank 0 unable to write a periodic checkpoint) does not meet: the
    others are in a step's all-reduce, which a barrier would not match.
    """
    say = (lambda text: print(text, file=sys.stderr)) if speak else (lambda text: None)
    together = False  # the step loop ended at the same step on every process
    try:
        try:
            train()
            together = True
        except (Interrupted, Diverged):
            together = True
            raise
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
        if run.saved_step is not None and run.saved_step == run.config.steps:
            # after the last step's checkpoint, in the report (calibration, metrics, plot):
            # the run is whole, its report may be the one before (found by probing)
            say(
                f"stopped while writing the report: {ckpt} holds the finished run (step "
                f"{run.saved_step:,}); its metrics and plot may be older. `{resume_hint}` "
                "writes them again"
            )
        else:
            say(f"stopped without saving. {last_good(run, ckpt)}")
        return EXIT_INTERRUPTED
    except Diverged as exc:
        say(f"error: training diverged: {exc}. {last_good(run, ckpt)}")
        say(advice)
        return EXIT_DIVERGED
    except OSError as exc:  # a full disk or a folder gone read-only mid-run
        say(f"error: {cannot_write(exc)}. {last_good(run, ckpt)}")
        return EXIT_DIVERGED
    finally:
        if together:
            meet()


def cannot_write(exc: OSError) -> str:
    """An OSError as a phrase naming its file: 'cannot write X: No space left on device'."""
    where = f" {exc.filename}" if exc.filename else ""
    return f"cannot write{where}: {exc.strerror or exc}"


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
