"""torch.optim optimizers fed the generated gradients through ``.grad``, and gradient clipping.

``sgd`` is ``p -= lr * (g + momentum * buf)`` style momentum SGD (``--momentum 0``: the seed's
plain ``p -= lr * g``); ``rmsprop`` divides by a running RMS of g and adds momentum on top (the
seed's pick for MNIST); ``adam`` and ``adamw`` (decoupled weight decay) use torch's defaults
betas=(0.9, 0.999), eps=1e-8.
"""

from __future__ import annotations

import torch

from train.classifier.config import ClassifierConfig


def make_optimizer(config: ClassifierConfig, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    """The optimizer ``config`` names, over ``params`` in the fixed W1, b1, W2, ... order."""
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
