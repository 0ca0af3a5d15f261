"""The training loop: minibatch, loss and gradients, update; checkpoints, Ctrl-C, divergence.

Everything random comes from one ``torch.Generator`` (init, then one minibatch draw per step),
and a checkpoint holds that generator's state with the parameters, optimizer state, step and
loss history, so a resumed run takes exactly the steps an uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from train import checkpoint, step
from train.compare import compare_gradients, format_table
from train.config import TrainConfig
from train.data import Dataset
from train.device import to_cpu
from train.engine import (  # noqa: F401 (Interrupted, apply_update: the MLP's names for them)
    Diverged,
    Interrupted,
    RunState,
    advance,
    apply_update,
    run_steps,
    state_payload,
)
from train.model import PARAM_NAMES, ModelShape, Params, calibrate, init_params
from train.progress import Progress


@dataclass
class Run(RunState):
    """The MLP's run: ``RunState`` plus where its data came from and when batchnorm was last
    calibrated (see ``calibration_due``)."""

    data_path: str = ""
    calibrated_step: int = 0


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
    optimizer = make_optimizer(config, params)
    return Run(config, data, params, optimizer, g, data_path=data_path)


def restore_run(payload: dict, config: TrainConfig, data: Dataset, data_path: str) -> Run:
    """Rebuild a run from a checkpoint payload (see ``snapshot``)."""
    params = {name: payload["params"][name].to(config.torch_dtype) for name in PARAM_NAMES}
    optimizer = make_optimizer(config, params)
    optimizer.load_state_dict(payload["optimizer"])
    g = torch.Generator()
    g.set_state(payload["generator"])
    at, losses = payload["step"], payload["losses"].tolist()
    seconds = float(payload.get("seconds", 0.0))
    return Run(
        config, data, params, optimizer, g, at, losses, seconds, at, data_path, calibrated_step=at
    )


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
    payload = state_payload(run)  # checks the parameters and optimizer state first
    bn_stats = None
    if calibrated:
        stats = calibrate(run.params, run.data.X_train)
        if not (torch.isfinite(stats.mean).all() and torch.isfinite(stats.var).all()):
            raise Diverged(run.step, "the batchnorm statistics are not finite")
        bn_stats, run.calibrated_step = to_cpu({"mean": stats.mean, "var": stats.var}), run.step
    return {
        **payload,
        "data": {"path": run.data_path, "sha256": run.data.sha256},
        "chars": run.data.chars,
        "bn_stats": bn_stats,
    }


def save(run: Run, path: Path, calibrated: bool = True) -> dict:
    """Checkpoint the run; afterwards it is the run's last good checkpoint."""
    payload = snapshot(run, calibrated)
    checkpoint.save(path, payload)
    run.saved_step = run.step
    return payload


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

    def take_step(interrupted: Callable[[], bool]) -> bool:
        ix = torch.randint(0, X.shape[0], (run.config.batch_size,), generator=run.generator)
        Xb, Yb = X[ix], Y[ix]
        if check_every and run.step % check_every == 0:
            print(format_table(run.step, compare_gradients(run.params, Xb, Yb)), flush=True)
        advance(run, *loss_and_grads(run.params, Xb, Yb))
        return interrupted()

    run_steps(
        run,
        take_step,
        lambda: progress.update(run.step, run.losses[-1]),
        lambda: save(run, checkpoint_path, calibrated=calibration_due(run)),
        checkpoint_every,
    )
