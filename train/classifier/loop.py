"""The classifier's training loop: minibatch, loss and gradients, clip, update, monitor.

As in the MLP's loop (``train.loop``, whose Ctrl-C handling and exceptions this reuses): one
``torch.Generator`` draws the initialisation and then one minibatch per step, and a checkpoint
holds its state with the parameters, optimizer state, step, batch losses and monitor history,
so a resumed run takes exactly the steps an uninterrupted one would. A non-finite loss or
gradient norm stops the run before that step's update, without saving.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from train import checkpoint
from train.classifier import monitor
from train.classifier.config import ClassifierConfig
from train.classifier.data import N_CLASSES, Dataset
from train.classifier.model import evaluate, init_params, layer_sizes, param_names
from train.classifier.optim import clip, make_optimizer
from train.classifier.step import STEPS
from train.engine import Diverged, RunState, run_steps, state_payload

MODEL = "classifier"  # marks our checkpoints apart from the MLP's


@dataclass
class Run(RunState):
    """The classifier's run: ``RunState`` plus batch accuracies and the monitor's history."""

    accs: list[float] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    monitor_every: int = 50  # a record every K steps; kept by a resumed run, so its history is
    # the history of an uninterrupted one

    def tensors(self) -> list[torch.Tensor]:
        return [self.params[name] for name in param_names(len(self.params) // 2)]


def new_run(config: ClassifierConfig, data: Dataset, monitor_every: int) -> Run:
    """Fresh parameters from the seeded generator; the same generator then draws the batches."""
    g = torch.Generator().manual_seed(config.seed)
    sizes = layer_sizes(data.n_features, config.hidden, N_CLASSES)
    params = init_params(sizes, g, config.torch_dtype)
    optimizer = make_optimizer(config, [params[k] for k in param_names(len(sizes) - 1)])
    return Run(config, data, params, optimizer, g, monitor_every=monitor_every)


def restore_run(
    payload: dict, config: ClassifierConfig, data: Dataset, monitor_every: int | None = None
) -> Run:
    """Rebuild a run from a checkpoint payload (see ``snapshot``); ``monitor_every`` overrides."""
    names = param_names(len(payload["params"]) // 2)
    params = {name: payload["params"][name].to(config.torch_dtype) for name in names}
    optimizer = make_optimizer(config, [params[k] for k in names])
    optimizer.load_state_dict(payload["optimizer"])
    g = torch.Generator()
    g.set_state(payload["generator"])
    at = payload["step"]
    return Run(
        config,
        data,
        params,
        optimizer,
        g,
        at,
        payload["losses"].tolist(),
        float(payload["seconds"]),
        at,
        accs=payload["accs"].tolist(),
        history=list(payload["history"]),
        monitor_every=monitor_every or payload["monitor_every"],
    )


def snapshot(run: Run) -> dict:
    """Everything ``restore_run`` needs, as plain tensors and builtins (weights_only loads it)."""
    return {
        **state_payload(run),
        "model": MODEL,
        "data": {"name": run.data.name, "source": run.data.source, "sha256": run.data.sha256},
        "accs": torch.tensor(run.accs, dtype=torch.float64),
        "history": run.history,
        "monitor_every": run.monitor_every,
    }


def load_checkpoint(path: Path) -> dict:
    """A classifier checkpoint written by ``checkpoint.save(path, snapshot(run))``, its
    contents checked against the sha256 digest ``save`` stored in it."""
    return checkpoint.verified(path, MODEL, ("config", "data", "step", "params", "optimizer"))


def optimizer_step(run: Run, grads: dict[str, torch.Tensor], watch: bool) -> tuple:
    """Feed ``grads`` through ``.grad``, clip, step; the norms and, when ``watch``, layer stats."""
    lr = run.config.lr_at(run.step)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    for name, p in run.params.items():
        p.grad = grads[name]
    raw = monitor.layer_grad_norms(grads, len(run.params) // 2) if watch else []
    norms = clip(run.tensors(), run.config.clip_grad_norm)  # scales the .grad tensors in place
    if not math.isfinite(norms[0]):
        raise Diverged(run.step + 1, f"the gradient norm is {norms[0]}")
    layers = {}
    if watch:
        layers = {"layer_grad_norm": raw, "update_ratio": monitor.update_ratios(run.params, lr)}
        before = {k: p.detach().clone() for k, p in run.params.items()}
    run.optimizer.step()
    for p in run.params.values():
        p.grad = None
    if watch:
        layers["applied_update_ratio"] = monitor.applied_ratios(before, run.params)
    return norms, layers


def watch_record(run: Run, norms: tuple[float, float], layers: dict) -> dict:
    """The monitor row for the step just taken, with the validation split evaluated after it."""
    since = run.history[-1]["step"] if run.history else 0
    val = evaluate(run.params, run.data.X_val, run.data.Y_val)
    lr = run.config.lr_at(run.step - 1)
    return monitor.record(run.step, lr, run.losses[since:], run.accs[since:], norms, layers, val)


def take_step(run: Run, X: torch.Tensor, Y: torch.Tensor, loss_and_grads: Callable) -> tuple | None:
    """One step: a minibatch drawn from ``run.generator``, loss and gradients, clip, update.

    Returns the monitor's (gradient norms, layer stats) when this step is watched (every
    ``run.monitor_every`` steps and the last), else None. Raises ``Diverged`` on a non-finite
    loss before anything changes (steps count from 1 in the message).
    """
    ix = torch.randint(0, X.shape[0], (run.config.batch_size,), generator=run.generator)
    loss, acc, grads = loss_and_grads(run.params, X[ix], Y[ix])
    if not math.isfinite(loss):
        raise Diverged(run.step + 1, f"the loss is {loss}")
    watch = (run.step + 1) % run.monitor_every == 0 or run.step + 1 == run.config.steps
    norms, layers = optimizer_step(run, grads, watch)
    run.losses.append(loss)
    run.accs.append(acc)
    run.step += 1
    return (norms, layers) if watch else None


def train(
    run: Run,
    ckpt: Path,
    checkpoint_every: int,
    progress: monitor.ClassifierProgress,
    on_record: Callable[[Run], None],
    compile: bool = False,
) -> None:
    """Step until ``config.steps``; a monitor record every ``run.monitor_every`` steps and at
    the end (``on_record`` writes it out), a checkpoint every ``checkpoint_every`` and at the end.

    Raises ``Interrupted`` after a Ctrl-C (the caller saves) and ``Diverged`` on a non-finite
    loss or gradient, before that step's update and without saving.
    """
    X, Y = run.data.X_train.to(run.config.torch_dtype), run.data.Y_train
    loss_and_grads = STEPS[run.config.backward]
    if compile:
        loss_and_grads = torch.compile(loss_and_grads)
    watched: list[tuple | None] = [None]

    def one_step(interrupted: Callable[[], bool]) -> bool:
        watched[0] = take_step(run, X, Y, loss_and_grads)
        return interrupted()

    def after_step() -> None:  # not timed: monitoring and progress
        if watched[0]:
            run.history.append(watch_record(run, *watched[0]))
            on_record(run)
        recent = slice(-min(50, len(run.losses)), None)
        progress.update(run.step, mean(run.losses[recent]), mean(run.accs[recent]))

    run_steps(run, one_step, after_step, lambda: save(run, ckpt), checkpoint_every)


def save(run: Run, ckpt: Path) -> None:
    """Checkpoint the run; afterwards it is the run's last good checkpoint."""
    checkpoint.save(ckpt, snapshot(run))
    run.saved_step = run.step


def mean(values: list[float]) -> float:
    return sum(values) / len(values)
