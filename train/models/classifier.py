"""The seed's MLP digit classifier (``python -m train --model classifier``), its backward chained
by hand from generated/ modules.

linear -> ReLU -> ... -> linear -> cross-entropy (``classifier_net``) on MNIST or scikit-learn's
8x8 digits (``classifier_data``). ``generated_step`` runs the forward through generated/linear,
relu and cross_entropy, keeping each op's ``saved``, then the backward in reverse order, one
visible call per op, and no ``loss.backward()``; ``autograd_step`` is the reference: plain torch
ops, ``F.relu``, ``F.cross_entropy`` and ``loss.backward()``. Every step clips and updates
through ``torch.optim``; every ``--monitor-every`` steps the run records what it watches
(``classifier_monitor``) and rewrites metrics.json, so a running or interrupted run can be read.
A checkpoint adds the batch accuracies and that history. The end of a run tests once (validation
is what the run watches on the way), prints each split's loss and accuracy, draws monitor.png.
Its options and config: ``classifier_options``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from generated import cross_entropy, linear, relu
from train import preflight, report
from train.engine import Job, RunState, check_loss, draw
from train.models import ModelSpec
from train.models import classifier_monitor as monitor
from train.models import classifier_options as command_line
from train.models.classifier_data import DIGITS, N_CLASSES, Images
from train.models.classifier_data import load_data as load
from train.models.classifier_net import (
    Evaluation,
    Params,
    evaluate,
    forward_torch,
    init_params,
    layer_sizes,
    make_optimizer,
    n_layers,
    param_shapes,
    step_bytes,
)
from train.models.classifier_options import MOMENTUM_OPTIMIZERS, MONITOR_EVERY, ClassifierConfig

Grads = dict[str, torch.Tensor]
StepResult = tuple[float, float, Grads]  # loss, batch accuracy, gradients
Step = Callable[[Params, torch.Tensor, torch.Tensor], StepResult]


@dataclass
class Run(RunState):
    """``RunState`` plus batch accuracies and the monitor's history; what the monitor and the
    end of a run ask of the network (``evaluate``, ``network``), which another image model's
    run (``train.models.cnn``) answers for its own."""

    accs: list[float] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    monitor_every: int = MONITOR_EVERY  # kept by a resumed run: its history is an unbroken one's
    model: ClassVar[str] = "classifier"  # the metrics' ``model``: the checkpoint's tag

    def evaluate(self, X: torch.Tensor, Y: torch.Tensor) -> Evaluation:
        """One split under the current parameters: loss, accuracy, dead ReLUs."""
        return evaluate(self.params, X, Y)

    def network(self) -> str:
        """The layers' widths, ``64 -> 512 -> 512 -> 10``."""
        sizes = [self.data.n_features, *self.config.hidden, N_CLASSES]
        return " -> ".join(str(n) for n in sizes)


def run_fields(args: argparse.Namespace, saved: dict | None) -> dict:
    """A resumed run's accuracies and history; ``--monitor-every`` over the checkpoint's."""
    if saved is None:
        return {"monitor_every": args.monitor_every or MONITOR_EVERY}
    accs, history = saved["accs"].tolist(), list(saved["history"])
    return {
        "accs": accs,
        "history": history,
        "monitor_every": args.monitor_every or saved["monitor_every"],
    }


# --- data, memory -------------------------------------------------------------------------------


def load_data(args: argparse.Namespace, config: ClassifierConfig, saved: dict | None) -> Images:
    """``--data``, else a resumed run's own (checked as it was: MNIST's sha256 or not)."""
    if saved is None:
        return load(args.data, verify=not args.no_verify)
    stored = saved["data"]
    given = args.data or (DIGITS if stored["name"] == DIGITS else stored["source"])
    return load(given, verify=not args.no_verify and stored["name"] != "idx")


def check_memory(config: ClassifierConfig, data: Images) -> None:
    """Refuse a network or batch that would not fit, before its parameters are allocated."""
    sizes = layer_sizes(data.n_features, config.hidden, N_CLASSES)
    split = max(len(data.Y_train), len(data.Y_val), len(data.Y_test))
    need = step_bytes(sizes, config.batch_size, config.dtype, split)
    hidden = ",".join(map(str, config.hidden)) or "none"
    what = f"--hidden {hidden} --batch-size {config.batch_size}"
    preflight.check_fits(need, what, "use smaller --hidden sizes or --batch-size")


# --- init and the step --------------------------------------------------------------------------


def init(config: ClassifierConfig, data: Images, g: torch.Generator) -> Params:
    sizes = layer_sizes(data.n_features, config.hidden, N_CLASSES)
    return init_params(sizes, g, config.torch_dtype)


def accuracy(logits: torch.Tensor, Y: torch.Tensor) -> float:
    return (logits.argmax(1) == Y).to(torch.float64).mean().item()


def generated_step(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> StepResult:
    """x -> [linear -> relu] * (L-1) -> linear -> cross_entropy, forward then backward by hand."""
    L = n_layers(params)
    h, linear_saved, relu_saved = Xb, [], []
    for i in range(1, L + 1):
        h, saved = linear.forward(h, params[f"W{i}"], params[f"b{i}"])
        linear_saved.append(saved)
        if i < L:
            h, saved = relu.forward(h)
            relu_saved.append(saved)
    logits = h
    loss, ce_saved = cross_entropy.forward(logits, Yb)

    # backward, in reverse; dloss/dloss = 1
    grads: Grads = {}
    dh, _ = cross_entropy.backward(torch.ones_like(loss), ce_saved)
    for i in range(L, 0, -1):
        # the images need no gradient: the first layer's dx (a GEMM) is skipped (needs)
        needs = (i > 1, True, True)
        dh, grads[f"W{i}"], grads[f"b{i}"] = linear.backward(dh, linear_saved[i - 1], needs)
        if i > 1:
            (dh,) = relu.backward(dh, relu_saved[i - 2])
    return loss.item(), accuracy(logits, Yb), grads


def autograd_step(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> StepResult:
    """Same model and batch through plain torch and ``loss.backward()``, on detached leaves."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss, logits = forward_torch(leaves, Xb, Yb)
    loss.backward()
    return loss.item(), accuracy(logits.detach(), Yb), {k: leaves[k].grad for k in params}


STEPS = {"generated": generated_step, "autograd": autograd_step}


def make_step(config: ClassifierConfig) -> Step:
    """The ``--backward``'s step, looked up when training starts (a test may swap one in)."""
    return STEPS[config.backward]


def take_step(run: Run, X: torch.Tensor, Y: torch.Tensor, step: Step) -> tuple | None:
    """One step: a minibatch drawn from ``run.generator``, loss and gradients, clip, update.

    Returns the monitor's (gradient norms, layer stats) when this step is watched (every
    ``run.monitor_every`` steps and the last), else None. Raises ``Diverged`` on a non-finite
    loss or gradient norm before anything changes (steps count from 1 in the message).
    """
    ix = draw(run, X.shape[0])
    loss, acc, grads = step(run.params, X[ix], Y[ix])
    check_loss(run, loss)
    watch = (run.step + 1) % run.monitor_every == 0 or run.step + 1 == run.config.steps
    norms, layers = monitor.watched_update(run, grads, watch)
    run.losses.append(loss)
    run.accs.append(acc)
    run.step += 1
    return (norms, layers) if watch else None


def trainer(run: Run, step: Step, job: Job, progress: monitor.ClassifierProgress) -> tuple:
    """Steps; after each (not timed) a watched step's record, written out, and the progress
    line of the last 50 batches' loss and accuracy."""
    X, Y = run.data.X_train.to(run.config.torch_dtype), run.data.Y_train
    watched: list[tuple | None] = [None]

    def one_step(interrupted: Callable[[], bool]) -> bool:
        watched[0] = take_step(run, X, Y, step)
        return interrupted()

    def after_step() -> None:
        if watched[0]:
            run.history.append(monitor.watch_record(run, *watched[0]))
            report.write_all(job, monitor.metrics(run))
        recent = slice(-min(50, len(run.losses)), None)
        progress.update(run.step, mean(run.losses[recent]), mean(run.accs[recent]))

    return one_step, after_step


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


# --- the checkpoint, the end of a run ----------------------------------------------------------


def checkpoint_fields(run: Run, periodic: bool) -> dict:
    d = run.data
    return {
        "data": {"name": d.name, "source": d.source, "sha256": d.sha256},
        "accs": torch.tensor(run.accs, dtype=torch.float64),
        "history": run.history,
        "monitor_every": run.monitor_every,
    }


def checkpoint_shapes(config: ClassifierConfig, saved: dict) -> dict[str, tuple[int, ...]]:
    """W1's rows are the images' pixels, which the checkpoint records nowhere else."""
    W1 = saved["params"].get("W1")
    n_features = W1.shape[0] if isinstance(W1, torch.Tensor) and W1.dim() == 2 else 0
    return param_shapes(layer_sizes(n_features, config.hidden, N_CLASSES))


def describe(run: Run, job: Job) -> str:
    c, d = run.config, run.data
    n_params = sum(p.numel() for p in run.params.values())
    extra = f" momentum {c.momentum:g}" if c.optimizer in MOMENTUM_OPTIMIZERS else ""
    extra += f" weight decay {c.weight_decay:g}" if c.weight_decay else ""
    extra += f", clip grad norm {c.clip_grad_norm:g}" if c.clip_grad_norm else ""
    return (
        f"data: {d.source}: train {len(d.Y_train):,} / val {len(d.Y_val):,} / test "
        f"{len(d.Y_test):,} images of {d.image_shape[0]}x{d.image_shape[1]}\n"
        f"MLP {run.network()} ({n_params:,} parameters), backward {c.backward}, {c.dtype}\n"
        f"{c.optimizer} lr {c.lr:g} then {c.lr / 10:g} from step {c.decay_step:,}{extra}, "
        f"batch {c.batch_size}, steps {run.step:,} -> {c.steps:,}"
    )


def finish(run: Run, final_payload: dict, job: Job) -> bool:
    """Train, val and test loss and accuracy, the metrics and monitor.png."""
    final = {split: run.evaluate(X, Y) for split, (X, Y) in run.data.splits().items()}
    for split, result in final.items():
        print(f"{split:<5} loss {result.loss:.4f}  accuracy {100 * result.accuracy:.2f}%")
    report.write_all(job, monitor.metrics(run, final))
    report.say_files(job)
    if not job.args.no_figure:
        figure = monitor.summary(run, final)
        png = job.out / "monitor.png"
        print(monitor.save_monitor_figure(run.history, figure, png, final["test"].accuracy))
    return report.all_finite(result.loss for result in final.values())


SPEC = ModelSpec.define(
    globals(),
    config=ClassifierConfig,
    run=Run,
    about="Train the seed's MLP digit classifier (linear -> ReLU -> ... -> linear -> "
    "cross-entropy)\nwith the backward chained from generated/ modules, no loss.backward().",
    examples="""examples (each is `python -m train --model classifier ...`):
  (no options)                        MNIST if found, else the bundled 8x8 digits; Adam
  --data digits --optimizer sgd       SGD with momentum 0.9 on the digits
  --optimizer rmsprop --clip-grad-norm 1     RMSprop with momentum, gradients clipped
  --resume --out runs/classifier      continue after Ctrl-C (the same result as no stop)
  --backward autograd                 the same run through torch autograd
""",
    out="runs/classifier",
    checkpoint_every=1000,
    figure="monitor.png",
    make=("classifier", "CLASSIFIER_ARGS"),
    autograd="the same run through F.relu, F.cross_entropy",
    fields={"accs": (torch.Tensor,), "history": (list,), "monitor_every": (int,)},
    data_keys=("name", "source", "sha256"),
    progress=monitor.ClassifierProgress,
    advice="Try a smaller --lr, or --clip-grad-norm.",
    options=command_line.options,
    resolve_config=command_line.resolve_config,
    make_optimizer=make_optimizer,
)
