"""The step variants: one SGD step ``step(params, X, Y, lr) -> loss`` each, updating in place.

A and B are what a user of torch would write; G is backgen's point; GC and AC are G and B under
``torch.compile``. All share one update (``sgd_update``), so only forward and backward differ.
No step calls ``.item()``: the loss comes back as a tensor, so nothing forces a sync.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from train.models.mlp import generated_loss_and_grads
from train.models.mlp_net import BN_EPS, Params, forward_torch

StepFn = Callable[[Params, torch.Tensor, torch.Tensor, float], torch.Tensor]


@dataclass(frozen=True)
class Variant:
    """A named step. ``autograd``: its parameters must require grad (it calls backward)."""

    name: str
    label: str
    step: StepFn
    autograd: bool
    compiled: bool = False
    eager_step: StepFn | None = field(default=None, compare=False)  # what was compiled


def sgd_update(params: Params, grads: Sequence[torch.Tensor], lr: float) -> None:
    """p -= lr * g for every parameter, one fused foreach call (the same for every variant)."""
    with torch.no_grad():
        torch._foreach_add_(list(params.values()), list(grads), alpha=-lr)


def _autograd_update(params: Params, loss: torch.Tensor, lr: float) -> None:
    """backward, update, and drop the grads so the next step starts from none."""
    loss.backward()
    sgd_update(params, [p.grad for p in params.values()], lr)
    for p in params.values():
        p.grad = None


def decomposed_loss(params: Params, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """The seed's step-by-step forward, every intermediate its own op (variant A)."""
    C, W1, b1, W2, b2, bngain, bnbias = params.values()
    n = X.shape[0]
    emb = C[X]
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ W1 + b1
    bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff**2
    bnvar = 1 / (n - 1) * (bndiff2).sum(0, keepdim=True)  # Bessel's correction
    bnvar_inv = (bnvar + BN_EPS) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = torch.tanh(hpreact)
    logits = h @ W2 + b2
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    counts_sum_inv = counts_sum**-1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    # the seed indexes with range(n); arange is the same op without a Python list per step
    return -logprobs[torch.arange(n, device=X.device), Y].mean()


def decomposed_step(params: Params, X: torch.Tensor, Y: torch.Tensor, lr: float) -> torch.Tensor:
    """A: autograd through the seed's decomposed forward."""
    loss = decomposed_loss(params, X, Y)
    _autograd_update(params, loss, lr)
    return loss


def fused_step(params: Params, X: torch.Tensor, Y: torch.Tensor, lr: float) -> torch.Tensor:
    """B: autograd through fused ops (``F.cross_entropy``, batchnorm from torch reductions)."""
    loss = forward_torch(params, X, Y)
    _autograd_update(params, loss, lr)
    return loss


def generated_step(params: Params, X: torch.Tensor, Y: torch.Tensor, lr: float) -> torch.Tensor:
    """G: the generated forwards and backwards chained by hand: ``train.models.mlp``'s own chain.

    What GC compiles. Parameters need no grad; nothing here builds a graph.
    """
    loss, grads = generated_loss_and_grads(params, X, Y)
    sgd_update(params, grads, lr)
    return loss


EAGER = {
    "A": Variant("A", "autograd, seed's decomposed forward", decomposed_step, autograd=True),
    "B": Variant("B", "autograd, fused ops", fused_step, autograd=True),
    "G": Variant("G", "generated backward, eager", generated_step, autograd=False),
}
# compiled variant -> (the eager variant it compiles, label)
COMPILED_FROM = {
    "GC": ("G", "generated step, torch.compile"),
    "AC": ("B", "fused autograd step, torch.compile"),
}
VARIANT_NAMES = ("A", "B", "G", "GC", "AC")


def compiled(name: str, base: Variant, label: str, options: dict) -> Variant:
    """``torch.compile`` of a whole step: forward, backward (or ``loss.backward()``), update.

    ``dynamic=False``: each size gets its own static graph, as a training run at one size would.
    """
    step = torch.compile(base.step, dynamic=False, **options)
    return Variant(name, label, step, base.autograd, compiled=True, eager_step=base.step)


def build_variants(names: Sequence[str], compile_options: dict) -> list[Variant]:
    """Variants in the order given; compiled ones get fresh ``torch.compile`` wrappers."""
    out = []
    for name in names:
        if name in EAGER:
            out.append(EAGER[name])
        elif name in COMPILED_FROM:
            base, label = COMPILED_FROM[name]
            out.append(compiled(name, EAGER[base], label, compile_options))
        else:
            raise ValueError(f"unknown variant {name!r}: choose from {', '.join(VARIANT_NAMES)}")
    return out
