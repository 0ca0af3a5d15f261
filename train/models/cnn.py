"""A small CNN digit classifier (``python -m train --model cnn``), its backward chained by hand
from generated/ modules.

[conv -> ReLU -> 2x2 max pool] per ``--channels`` entry, then linear -> cross-entropy
(``cnn_net``), on the classifier's data (MNIST or scikit-learn's 8x8 digits, as
``classifier_data`` finds them), each image one grey channel. ``generated_step`` runs the
forward through generated/conv2d, relu, max_pool2d, linear and cross_entropy, keeping each op's
``saved``, then the backward in reverse order, one visible call per op, and no
``loss.backward()``; ``autograd_step`` is the reference: F.conv2d, F.relu, F.max_pool2d,
F.cross_entropy and ``loss.backward()``. The rest is the classifier's: optimizers, clipping,
the monitor every ``--monitor-every`` steps, metrics.json, monitor.png, the checkpoint's fields
and the end of a run (``classifier``). ``--check-every K`` prints the gradient table of both
backwards (``train.compare``). Its options and config: ``cnn_options``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from generated import conv2d, cross_entropy, linear, max_pool2d, relu
from train import preflight
from train.compare import compare_gradients, format_table
from train.engine import Job
from train.models import ModelSpec, classifier
from train.models import classifier_monitor as monitor
from train.models import cnn_options as command_line
from train.models.classifier import accuracy, checkpoint_fields, finish, run_fields
from train.models.classifier_data import N_CLASSES, Images
from train.models.classifier_net import Evaluation, Params, make_optimizer, n_layers
from train.models.classifier_options import MOMENTUM_OPTIMIZERS
from train.models.cnn_net import (
    POOL,
    block_shapes,
    evaluate,
    forward_torch,
    init_params,
    kernel_of,
    n_features,
    param_shapes,
    step_bytes,
)
from train.models.cnn_options import CNNConfig

Grads = dict[str, torch.Tensor]
StepResult = tuple[float, float, Grads]  # loss, batch accuracy, gradients
Step = Callable[[Params, torch.Tensor, torch.Tensor], StepResult]


@dataclass
class Run(classifier.Run):
    """The classifier's run, evaluated and described as the CNN."""

    model: ClassVar[str] = "cnn"

    def evaluate(self, X: torch.Tensor, Y: torch.Tensor) -> Evaluation:
        return evaluate(self.params, X, Y)

    def network(self) -> str:
        """The blocks' output shapes, ``1x8x8 -> 32x4x4 -> 64x2x2 -> 10``."""
        shapes = [
            (1, *self.data.image_shape),
            *block_shapes(self.data.image_shape, self.config.channels),
        ]
        return " -> ".join("x".join(map(str, s)) for s in shapes) + f" -> {N_CLASSES}"


# --- data, memory -------------------------------------------------------------------------------


def load_data(args: argparse.Namespace, config: CNNConfig, saved: dict | None) -> Images:
    """The classifier's data, each image [1, H, W] (one grey channel) instead of flat."""
    data = classifier.load_data(args, config, saved)
    as_images = {
        name: X.reshape(len(X), 1, *data.image_shape)
        for name, X in (("X_train", data.X_train), ("X_val", data.X_val), ("X_test", data.X_test))
    }
    return replace(data, **as_images)


def check_memory(config: CNNConfig, data: Images) -> None:
    """Refuse blocks that pool the image away, or a network or batch that would not fit, before
    the parameters are allocated."""
    h, w = data.image_shape
    blocks, most = len(config.channels), min(h, w).bit_length() - 1  # floor(side / 2**most) >= 1
    if blocks > most:
        raise preflight.UsageError(
            f"--channels {','.join(map(str, config.channels))}: {blocks} 2x2 pools shrink "
            f"{h}x{w} images to nothing; give at most {most} channel counts"
        )
    shapes = shapes_for(config, data.image_shape)
    need = step_bytes(shapes, data.image_shape, config.channels, config.batch_size, config.dtype)
    what = f"--channels {','.join(map(str, config.channels))} --batch-size {config.batch_size}"
    preflight.check_fits(need, what, "use fewer --channels or a smaller --batch-size")


def shapes_for(config: CNNConfig, image_shape: tuple[int, int]) -> dict[str, tuple[int, ...]]:
    features = n_features(image_shape, config.channels)
    return param_shapes(config.channels, config.kernel, features, N_CLASSES)


# --- init and the step --------------------------------------------------------------------------


def init(config: CNNConfig, data: Images, g: torch.Generator) -> Params:
    return init_params(shapes_for(config, data.image_shape), g, config.torch_dtype)


def generated_step(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> StepResult:
    """x -> [conv2d -> relu -> max_pool2d] * (L-1) -> flatten -> linear -> cross_entropy,
    forward then backward by hand."""
    L, padding = n_layers(params), kernel_of(params) // 2
    h, blocks = Xb, []
    for i in range(1, L):
        h, conv_saved = conv2d.forward(h, params[f"W{i}"], params[f"b{i}"], padding=padding)
        h, relu_saved = relu.forward(h)
        h, pool_saved = max_pool2d.forward(h, kernel_size=POOL, stride=POOL)
        blocks.append((conv_saved, relu_saved, pool_saved))
    pooled = h.shape
    logits, linear_saved = linear.forward(h.reshape(len(h), -1), params[f"W{L}"], params[f"b{L}"])
    loss, ce_saved = cross_entropy.forward(logits, Yb)

    # backward, in reverse; dloss/dloss = 1; flatten's adjoint is the reshape back
    grads: Grads = {}
    dlogits, _ = cross_entropy.backward(torch.ones_like(loss), ce_saved)
    dh, grads[f"W{L}"], grads[f"b{L}"] = linear.backward(dlogits, linear_saved)
    dh = dh.reshape(pooled)
    for i in range(L - 1, 0, -1):
        conv_saved, relu_saved, pool_saved = blocks[i - 1]
        (dh,) = max_pool2d.backward(dh, pool_saved)
        (dh,) = relu.backward(dh, relu_saved)
        # the images need no gradient: the first convolution's dx is skipped (needs)
        needs = (i > 1, True, True)
        dh, grads[f"W{i}"], grads[f"b{i}"] = conv2d.backward(dh, conv_saved, needs)
    return loss.item(), accuracy(logits, Yb), grads


def autograd_step(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> StepResult:
    """Same model and batch through plain torch and ``loss.backward()``, on detached leaves."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss, logits = forward_torch(leaves, Xb, Yb)
    loss.backward()
    return loss.item(), accuracy(logits.detach(), Yb), {k: leaves[k].grad for k in params}


STEPS = {"generated": generated_step, "autograd": autograd_step}


def make_step(config: CNNConfig) -> Step:
    """The ``--backward``'s step, looked up when training starts (a test may swap one in)."""
    return STEPS[config.backward]


def trainer(run: Run, step: Step, job: Job, progress: monitor.ClassifierProgress) -> tuple:
    """The classifier's steps and records; every ``--check-every`` steps, after the step (not
    timed, drawing nothing from the run's generator), the gradient table of both backwards on
    the first batch of training images."""
    one_step, after_step = classifier.trainer(run, step, job, progress)
    every = job.args.check_every
    if not every:
        return one_step, after_step
    X = run.data.X_train[: run.config.batch_size].to(run.config.torch_dtype)
    Y = run.data.Y_train[: run.config.batch_size]

    def after_step_and_check() -> None:
        after_step()
        if run.step % every == 0:
            print(format_table(run.step, compare_gradients(STEPS, run.params, X, Y)), flush=True)

    return one_step, after_step_and_check


# --- the checkpoint ----------------------------------------------------------------------------


def checkpoint_shapes(config: CNNConfig, saved: dict) -> dict[str, tuple[int, ...]]:
    """The linear layer's rows are the last block's features, which depend on the images' size,
    which the checkpoint records nowhere else."""
    last = saved["params"].get(f"W{len(config.channels) + 1}")
    features = last.shape[0] if isinstance(last, torch.Tensor) and last.dim() == 2 else 0
    return param_shapes(config.channels, config.kernel, features, N_CLASSES)


def describe(run: Run, job: Job) -> str:
    c, d = run.config, run.data
    n_params = sum(p.numel() for p in run.params.values())
    extra = f" momentum {c.momentum:g}" if c.optimizer in MOMENTUM_OPTIMIZERS else ""
    extra += f" weight decay {c.weight_decay:g}" if c.weight_decay else ""
    extra += f", clip grad norm {c.clip_grad_norm:g}" if c.clip_grad_norm else ""
    return (
        f"data: {d.source}: train {len(d.Y_train):,} / val {len(d.Y_val):,} / test "
        f"{len(d.Y_test):,} images of {d.image_shape[0]}x{d.image_shape[1]}\n"
        f"CNN {run.network()}, {c.kernel}x{c.kernel} convs, {POOL}x{POOL} max pools "
        f"({n_params:,} parameters), backward {c.backward}, {c.dtype}\n"
        f"{c.optimizer} lr {c.lr:g} then {c.lr / 10:g} from step {c.decay_step:,}{extra}, "
        f"batch {c.batch_size}, steps {run.step:,} -> {c.steps:,}"
    )


SPEC = ModelSpec.define(
    globals(),
    config=CNNConfig,
    run=Run,
    about="Train a small CNN digit classifier ([conv -> ReLU -> 2x2 max pool] per channel "
    "count -> linear ->\ncross-entropy) with the backward chained from generated/ modules, "
    "no loss.backward().",
    examples="""examples (each is `python -m train --model cnn ...`):
  (no options)                        MNIST if found, else the bundled 8x8 digits; AdamW
  --data digits --channels 8,16       narrower convs on the digits
  --resume --out runs/cnn             continue after Ctrl-C (the same result as no stop)
  --backward autograd                 the same run through torch autograd
  --dtype float64 --check-every 500   gradient tables, generated against autograd
""",
    out="runs/cnn",
    checkpoint_every=1000,
    figure="monitor.png",
    make=("cnn", "CNN_ARGS"),
    autograd="the same run through F.conv2d, F.relu, F.max_pool2d, F.cross_entropy",
    fields=classifier.SPEC.fields,
    data_keys=classifier.SPEC.data_keys,
    progress=monitor.ClassifierProgress,
    advice=classifier.SPEC.advice,
    options=command_line.options,
    resolve_config=command_line.resolve_config,
    # the classifier's own, imported above: optimizers, run fields, checkpoint fields, the end
    make_optimizer=make_optimizer,
    run_fields=run_fields,
    checkpoint_fields=checkpoint_fields,
    finish=finish,
)
