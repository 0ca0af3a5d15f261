"""One training step's loss, batch accuracy and gradients, by generated modules or by autograd.

``generated_step`` is the point of backgen: the forward through generated/linear, relu and
cross_entropy, keeping each op's ``saved``, then the backward in reverse order, one visible call
per op, and no ``loss.backward()``. ``autograd_step`` is the reference: plain torch ops,
``F.relu``, ``F.cross_entropy`` and ``loss.backward()``.
"""

from __future__ import annotations

import torch

from generated import cross_entropy, linear, relu
from train.classifier.model import Params, forward_torch, n_layers

Grads = dict[str, torch.Tensor]
StepResult = tuple[float, float, Grads]  # loss, batch accuracy, gradients


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
        dh, grads[f"W{i}"], grads[f"b{i}"] = linear.backward(dh, linear_saved[i - 1])
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
