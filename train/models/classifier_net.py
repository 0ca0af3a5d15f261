"""The seed's MLP classifier: linear layers with ReLU between them, logits for 10 classes, mean
cross-entropy.

Parameters are ``W1, b1, ..., WL, bL`` in the seeds' layout (``x @ W + b``, W of shape
[fan_in, fan_out]). This module holds what both backward modes share: the initialisation, the
plain-torch forward that autograd differentiates, the evaluation of a whole split, the
optimizers fed the gradients and the clipping, and the memory a network and batch need.

``sgd`` is ``p -= lr * (g + momentum * buf)`` style momentum SGD (``--momentum 0``: the seed's
plain ``p -= lr * g``); ``rmsprop`` divides by a running RMS of g and adds momentum on top (the
seed's pick for MNIST); ``adam`` and ``adamw`` (decoupled weight decay) use torch's defaults
betas=(0.9, 0.999), eps=1e-8.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from train.models.classifier import ClassifierConfig

Params = dict[str, torch.Tensor]


def layer_sizes(n_features: int, hidden: tuple[int, ...], n_classes: int) -> list[int]:
    return [n_features, *hidden, n_classes]


def param_names(n_layers: int) -> list[str]:
    """W1, b1, W2, b2, ...: the order of the optimizer's parameter list and of every table."""
    return [f"{kind}{i}" for i in range(1, n_layers + 1) for kind in ("W", "b")]


def param_shapes(sizes: list[int]) -> dict[str, tuple[int, ...]]:
    """Every parameter's shape, in ``param_names`` order: what ``init_params`` draws."""
    shapes: dict[str, tuple[int, ...]] = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        shapes[f"W{i}"], shapes[f"b{i}"] = (fan_in, fan_out), (fan_out,)
    return shapes


def init_params(sizes: list[int], g: torch.Generator, dtype: torch.dtype) -> Params:
    """Kaiming-normal weights, zero biases, all drawn from ``g`` layer by layer.

    A layer feeding a ReLU gets std sqrt(2 / fan_in) (the ReLU halves the second moment, so the
    factor 2 keeps activations at unit scale layer after layer); the last, feeding the softmax,
    gets std sqrt(1 / fan_in), logits of unit scale. Drawn in float32, then converted, so float32
    and float64 runs start from the same numbers.
    """
    params: Params = {}
    last = len(sizes) - 1
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        gain = 1.0 if i == last else 2.0
        params[f"W{i}"] = (torch.randn((fan_in, fan_out), generator=g) * (gain / fan_in) ** 0.5).to(
            dtype
        )
        params[f"b{i}"] = torch.zeros(fan_out, dtype=dtype)
    return params


def n_layers(params: Params) -> int:
    return len(params) // 2


def hidden_and_logits(params: Params, X: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Plain-torch forward (F.relu): every hidden layer's ReLU output and the logits."""
    h, hidden = X, []
    for i in range(1, n_layers(params) + 1):
        h = h @ params[f"W{i}"] + params[f"b{i}"]
        if i < n_layers(params):
            h = F.relu(h)
            hidden.append(h)
    return hidden, h


def forward_torch(
    params: Params, X: torch.Tensor, Y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy (F.cross_entropy) and the logits: what autograd differentiates."""
    _, logits = hidden_and_logits(params, X)
    return F.cross_entropy(logits, Y), logits


@dataclass(frozen=True)
class Evaluation:
    """A whole split under the current parameters."""

    loss: float
    accuracy: float
    dead: list[float]  # per hidden layer: fraction of units that output 0 on every example


@torch.no_grad()
def evaluate(params: Params, X: torch.Tensor, Y: torch.Tensor) -> Evaluation:
    """Loss, accuracy and dead-ReLU fractions of one split (X in the parameters' dtype)."""
    X = X.to(params["W1"].dtype)
    hidden, logits = hidden_and_logits(params, X)
    loss = F.cross_entropy(logits, Y).item()
    accuracy = (logits.argmax(1) == Y).to(torch.float64).mean().item()
    dead = [(h > 0).sum(0).eq(0).to(torch.float64).mean().item() for h in hidden]
    return Evaluation(loss, accuracy, dead)


def make_optimizer(config: ClassifierConfig, params: Params) -> torch.optim.Optimizer:
    """The optimizer ``config`` names, over ``params`` in the fixed W1, b1, W2, ... order."""
    params = list(params.values())
    lr, wd, momentum = config.lr, config.weight_decay, config.momentum
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd)
    if config.optimizer == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, momentum=momentum, weight_decay=wd)
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    raise ValueError(f"unknown optimizer {config.optimizer!r}")  # the CLI checks before


def clip(params: list[torch.Tensor], max_norm: float) -> tuple[float, float]:
    """Total gradient norm before and after ``clip_grad_norm_`` (``max_norm`` 0: no clipping).

    torch scales every gradient by min(1, max_norm / (norm + 1e-6)), so after clipping the total
    norm is at most ``max_norm``; the norm is the 2-norm of all gradients as one vector.
    """
    if max_norm > 0:
        before = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    else:
        before = float(torch.nn.utils.get_total_norm([p.grad for p in params]))
    after = (
        float(torch.nn.utils.get_total_norm([p.grad for p in params])) if max_norm > 0 else before
    )
    return before, after


def step_bytes(sizes: list[int], batch_size: int, dtype: str, split: int) -> int:
    """Estimated peak bytes, in items of the dtype: parameters with their gradients, two
    optimizer states and the float32 draw of the initialisation (~5 per parameter); per example
    of a batch 4 activations or gradients of every layer's width; evaluating a whole split (of
    ``split`` examples) holds every layer's output."""
    n_params = sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
    item = 8 if dtype == "float64" else 4
    return (5 * n_params + max(4 * batch_size, 2 * split) * sum(sizes)) * item
