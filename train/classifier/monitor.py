"""What the run watches every K steps, as the seed's GradientMonitor does, and the progress line.

Per layer l (its W and b together):
    grad norm      |g_l| = sqrt(|dW_l|^2 + |db_l|^2), of the raw gradient (before clipping)
    update ratio   log10(|lr * g_l| / |p_l|), g_l as clipped (what the optimizer was fed), p_l
                   before the update: about -3 is healthy; far below, the layer hardly learns;
                   far above, it is being thrown around
    applied ratio  log10(|p_after - p_before| / |p_before|), the step the optimizer really took
and in total the gradient norm before and after clipping, the fraction of dead ReLUs per hidden
layer (units that output 0 on every validation example), the mean batch loss and accuracy since
the last record and the validation loss and accuracy after this step's update.
"""

from __future__ import annotations

import math

import torch

from train.classifier.model import Evaluation, Params, n_layers
from train.progress import Progress


def layer_norm(tensors: list[torch.Tensor]) -> float:
    return math.sqrt(sum(float(t.double().square().sum()) for t in tensors))


def layer_grad_norms(grads: dict[str, torch.Tensor], n: int) -> list[float]:
    """|g_l| per layer; call before clipping, which scales the gradients in place."""
    return [layer_norm([grads[f"W{i}"], grads[f"b{i}"]]) for i in range(1, n + 1)]


def update_ratios(params: Params, lr: float) -> list[float]:
    """log10(|lr * g_l| / |p_l|) per layer, g_l = ``p.grad`` as fed to the optimizer (clipped)."""
    ratios = []
    for i in range(1, n_layers(params) + 1):
        W, b = params[f"W{i}"], params[f"b{i}"]
        update = lr * layer_norm([W.grad, b.grad])
        data = layer_norm([W, b])
        ratios.append(math.log10(update / data) if update > 0 and data > 0 else -math.inf)
    return ratios


def applied_ratios(before: Params, after: Params) -> list[float]:
    """Per layer log10(|p_after - p_before| / |p_before|): the step the optimizer really took.

    Equal to the lr*grad ratio for plain SGD; for RMSprop and Adam, which divide by a running
    RMS of the gradient, the real step is about lr per weight however small the gradient is.
    """
    ratios = []
    for i in range(1, n_layers(before) + 1):
        names = (f"W{i}", f"b{i}")
        step = layer_norm([after[k].detach() - before[k] for k in names])
        data = layer_norm([before[k] for k in names])
        ratios.append(math.log10(step / data) if step > 0 and data > 0 else -math.inf)
    return ratios


def record(
    step: int,
    lr: float,
    batch_losses: list[float],
    batch_accs: list[float],
    norms: tuple[float, float],
    layers: dict[str, list[float]],
    val: Evaluation,
) -> dict:
    """One row of the monitor history (plain floats and lists: JSON and checkpoint alike)."""
    return {
        "step": step,
        "lr": lr,
        "train_loss": sum(batch_losses) / len(batch_losses),
        "train_acc": sum(batch_accs) / len(batch_accs),
        "val_loss": val.loss,
        "val_acc": val.accuracy,
        "dead_relu": list(val.dead),
        "grad_norm_before_clip": norms[0],
        "grad_norm_after_clip": norms[1],
        **layers,
    }


class ClassifierProgress(Progress):
    """The MLP's progress line with the accuracy added (both: means over recent batches)."""

    def update(self, step: int, loss: float, acc: float = math.nan) -> None:  # type: ignore[override]
        self.show(step, f"loss {loss:.4f} | acc {100 * acc:5.1f}%")
