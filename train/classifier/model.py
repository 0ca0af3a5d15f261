"""The seed's MLP: linear layers with ReLU between them, logits for 10 classes, mean cross-entropy.

Parameters are ``W1, b1, ..., WL, bL`` in the seeds' layout (``x @ W + b``, W of shape
[fan_in, fan_out]). This module holds what both backward modes share: the initialisation, the
plain-torch forward that autograd differentiates, and the evaluation of a whole split.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

Params = dict[str, torch.Tensor]


def layer_sizes(n_features: int, hidden: tuple[int, ...], n_classes: int) -> list[int]:
    return [n_features, *hidden, n_classes]


def param_names(n_layers: int) -> list[str]:
    """W1, b1, W2, b2, ...: the order of the optimizer's parameter list and of every table."""
    return [f"{kind}{i}" for i in range(1, n_layers + 1) for kind in ("W", "b")]


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
