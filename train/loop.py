"""The training loop: minibatch, loss and gradients, update; checkpoints, Ctrl-C, divergence.

Everything random comes from one ``torch.Generator`` (init, then one minibatch draw per step),
and a checkpoint holds that generator's state with the parameters, optimizer state, step and
loss history, so a resumed run takes exactly the steps an uninterrupted one would.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from train import checkpoint, step
from train.compare import compare_gradients, format_table
from train.config import TrainConfig
from train.data import Dataset
from train.device import to_cpu
from train.model import PARAM_NAMES, ModelShape, Params, calibrate, init_params
from train.progress import Progress


class Interrupted(Exception):
    """Ctrl-C arrived; raised between steps, so the state is a whole number of steps."""


class Diverged(Exception):
    """The loss or the parameters stopped being finite; nothing after the last good step is kept."""

    def __init__(self, step: int, what: str) -> None:
        super().__init__(f"{what} at step {step}")
        self.step = step


@dataclass
class Run:
    """A run in progress: its config, data and everything that changes step by step."""

    config: TrainConfig
    data: Dataset
    data_path: str
    params: Params
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    step: int = 0
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0  # training time over all sessions of this run
    saved_step: int | None = None  # step of the last good checkpoint of this run, if any
    calibrated_step: int = 0  # step of the last batchnorm calibration (see calibration_due)


def make_optimizer(config: TrainConfig, params: Params) -> torch.optim.Optimizer:
    """Plain SGD (the seed's ``p += -lr * grad``) or AdamW; both read gradients from ``.grad``."""
    tensors = [params[name] for name in PARAM_NAMES]
    if config.optimizer == "adamw":
        return torch.optim.AdamW(tensors, lr=config.lr)
    return torch.optim.SGD(tensors, lr=config.lr)


def new_run(config: TrainConfig, data: Dataset, data_path: str) -> Run:
    """Fresh parameters from the seeded generator; the same generator then draws the batches."""
    g = torch.Generator().manual_seed(config.seed)
    shape = ModelShape(len(data.chars), config.block_size, config.n_embd, config.n_hidden)
    params = init_params(shape, g, config.torch_dtype)
    return Run(config, data, data_path, params, make_optimizer(config, params), g)


def restore_run(payload: dict, config: TrainConfig, data: Dataset, data_path: str) -> Run:
    """Rebuild a run from a checkpoint payload (see ``snapshot``)."""
    params = {name: payload["params"][name].to(config.torch_dtype) for name in PARAM_NAMES}
    optimizer = make_optimizer(config, params)
    optimizer.load_state_dict(payload["optimizer"])
    g = torch.Generator()
    g.set_state(payload["generator"])
    losses = payload["losses"].tolist()
    seconds = float(payload.get("seconds", 0.0))
    at = payload["step"]
    return Run(config, data, data_path, params, optimizer, g, at, losses, seconds, at, at)


def calibration_due(run: Run) -> bool:
    """Calibrate at a periodic save only after one epoch's worth of examples since the last.

    Calibration is one forward pass over the whole training set, so it costs less than an
    epoch of training steps (forward, backward and update of as many examples); on the names
    data one calibration took as long as about 2,300 steps of 32, an epoch is 5,700. Calibrating
    only after ``steps * batch_size >= len(train)`` examples bounds its share of the run
    however small ``--checkpoint-every`` is (before, ``--checkpoint-every 1`` calibrated at
    every step). A checkpoint saved without it holds ``bn_stats = None``: resuming never reads
    them, and ``--sample`` calibrates from the run's data.
    """
    examples = (run.step - run.calibrated_step) * run.config.batch_size
    return examples >= len(run.data.Y_train)


def snapshot(run: Run, calibrated: bool = True) -> dict:
    """Everything ``restore_run`` and ``--sample`` need, as plain tensors and builtins.

    Raises ``Diverged`` rather than return anything not finite, so no checkpoint ever holds
    a NaN or infinity (parameters, optimizer state or batchnorm statistics).
    """
    for name, p in run.params.items():
        if not torch.isfinite(p).all():
            raise Diverged(run.step, f"parameter {name} is not finite")
    optimizer = run.optimizer.state_dict()
    for state in optimizer["state"].values():
        if any(torch.is_tensor(v) and not torch.isfinite(v).all() for v in state.values()):
            raise Diverged(run.step, "the optimizer state is not finite")
    bn_stats = None
    if calibrated:
        stats = calibrate(run.params, run.data.X_train)
        if not (torch.isfinite(stats.mean).all() and torch.isfinite(stats.var).all()):
            raise Diverged(run.step, "the batchnorm statistics are not finite")
        bn_stats, run.calibrated_step = to_cpu({"mean": stats.mean, "var": stats.var}), run.step
    return {
        "config": run.config.as_dict(),
        "data": {"path": run.data_path, "sha256": run.data.sha256},
        "chars": run.data.chars,
        "step": run.step,
        "params": {k: v.detach().cpu().clone() for k, v in run.params.items()},
        "optimizer": to_cpu(optimizer),
        "generator": run.generator.get_state(),
        "losses": torch.tensor(run.losses, dtype=torch.float64),
        "seconds": run.seconds,
        "bn_stats": bn_stats,
    }


def save(run: Run, path: Path, calibrated: bool = True) -> dict:
    """Checkpoint the run; afterwards it is the run's last good checkpoint."""
    payload = snapshot(run, calibrated)
    checkpoint.save(path, payload)
    run.saved_step = run.step
    return payload


@contextmanager
def ctrl_c_between_steps(patient: bool = False) -> Iterator[Callable[[], bool]]:
    """Turn the first Ctrl-C into a flag the loop checks after each step.

    A KeyboardInterrupt raised mid-update could leave some parameters stepped and others not;
    deferring it to the step boundary keeps every checkpoint exact. A second Ctrl-C raises at
    once, for when the user really wants out, unless ``patient``: under ``torchrun`` a worker
    gets the terminal's SIGINT and then the one torchrun forwards (or its SIGTERM), and must
    still reach the step boundary and save; torchrun kills it 30 s later if it hangs.
    """
    hit = []

    def handler(signum: int, frame: object) -> None:
        if hit and not patient:
            raise KeyboardInterrupt
        hit.append(signum)

    if threading.current_thread() is not threading.main_thread():
        yield lambda: False  # signal handlers can only be set from the main thread
        return
    signums = (signal.SIGINT, signal.SIGTERM) if patient else (signal.SIGINT,)
    previous = {s: signal.signal(s, handler) for s in signums}
    try:
        yield lambda: bool(hit)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def apply_update(run: Run, grads: dict[str, torch.Tensor]) -> None:
    """Hand the gradients to the optimizer through ``.grad`` at this step's learning rate."""
    for group in run.optimizer.param_groups:
        group["lr"] = run.config.lr_at(run.step)
    for name, p in run.params.items():
        p.grad = grads[name]
    run.optimizer.step()
    for p in run.params.values():
        p.grad = None


def train(
    run: Run,
    checkpoint_path: Path,
    checkpoint_every: int,
    check_every: int,
    progress: Progress,
    compile: bool = False,
) -> None:
    """Step until ``config.steps``; checkpoint every ``checkpoint_every`` steps.

    Raises ``Interrupted`` after a Ctrl-C (the caller saves) and ``Diverged`` on a non-finite
    loss, before that step's update and without saving, so the last checkpoint stays good.
    The save at the last step may skip calibration: ``finish`` saves calibrated anyway.
    """
    X, Y = run.data.X_train, run.data.Y_train
    loss_and_grads = step.STEPS[run.config.backward]
    if compile:
        loss_and_grads = torch.compile(loss_and_grads)
    started = time.perf_counter()
    with ctrl_c_between_steps() as interrupted:
        while run.step < run.config.steps:
            ix = torch.randint(0, X.shape[0], (run.config.batch_size,), generator=run.generator)
            Xb, Yb = X[ix], Y[ix]
            if check_every and run.step % check_every == 0:
                print(format_table(run.step, compare_gradients(run.params, Xb, Yb)), flush=True)
            loss, grads = loss_and_grads(run.params, Xb, Yb)
            if not math.isfinite(loss):
                raise Diverged(run.step + 1, f"the loss is {loss}")  # steps count from 1
            apply_update(run, grads)
            run.losses.append(loss)
            run.step += 1
            now = time.perf_counter()
            run.seconds, started = run.seconds + (now - started), now
            progress.update(run.step, loss)
            if run.step % checkpoint_every == 0 or run.step == run.config.steps:
                save(run, checkpoint_path, calibrated=calibration_due(run))
            if interrupted():
                raise Interrupted
