"""One training step's loss and gradients, by the generated ops or by torch autograd.

``generated_step`` is the point of backgen: the seed's forward through the generated ops,
keeping each op's ``saved``, then the backward in reverse order, one visible call per op, and
no ``loss.backward()`` anywhere. ``autograd_step`` is the reference it is measured against.
"""

from __future__ import annotations

import torch

from generated import batchnorm, cross_entropy, embedding, linear, tanh
from train.model import BN_EPS, PARAM_NAMES, Params, forward_torch

Grads = dict[str, torch.Tensor]


def generated_loss_and_grads(
    params: Params, Xb: torch.Tensor, Yb: torch.Tensor
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The loss (a tensor: no ``.item()``, so it compiles whole) and the gradients in
    ``PARAM_NAMES`` order, through generated/ forwards and backwards.

    The one hand-chained MLP step: the training loop and the benchmark's G and GC run it.
    No name outlives its use (``del``): a local would keep a full-size activation alive to
    the end of the step, and the benchmark's large size measures that peak.
    """
    C, W1, b1, W2, b2, bngain, bnbias = (params[name] for name in PARAM_NAMES)

    # forward, keeping what each op saved for its backward
    emb, emb_saved = embedding.forward(Xb, C)  # (N, T, E)
    emb_shape = emb.shape
    embcat = emb.view(emb_shape[0], -1)  # concatenate the T embeddings: (N, T*E)
    hprebn, lin1_saved = linear.forward(embcat, W1, b1)
    hpreact, bn_saved = batchnorm.forward(hprebn, bngain, bnbias, eps=BN_EPS)
    del emb, embcat, hprebn
    h, tanh_saved = tanh.forward(hpreact)
    del hpreact
    logits, lin2_saved = linear.forward(h, W2, b2)
    del h
    loss, ce_saved = cross_entropy.forward(logits, Yb)
    del logits

    # backward, in reverse; dloss/dloss = 1
    dlogits, _ = cross_entropy.backward(torch.ones_like(loss), ce_saved)
    dh, dW2, db2 = linear.backward(dlogits, lin2_saved)
    del dlogits, ce_saved, lin2_saved
    (dhpreact,) = tanh.backward(dh, tanh_saved)
    del dh, tanh_saved
    dhprebn, dbngain, dbnbias = batchnorm.backward(dhpreact, bn_saved)
    del dhpreact, bn_saved
    dembcat, dW1, db1 = linear.backward(dhprebn, lin1_saved)
    del dhprebn, lin1_saved
    demb = dembcat.view(emb_shape)  # undo the concatenation
    _, dC = embedding.backward(demb, emb_saved)
    return loss, (dC, dW1, db1, dW2, db2, dbngain, dbnbias)


def generated_step(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> tuple[float, Grads]:
    """Loss and every parameter's gradient through generated/ forwards and backwards."""
    loss, grads = generated_loss_and_grads(params, Xb, Yb)
    return loss.item(), dict(zip(PARAM_NAMES, grads, strict=True))


def autograd_step(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> tuple[float, Grads]:
    """Same model and batch: the plain-torch forward and ``loss.backward()``.

    Works on detached copies so the caller's tensors never carry autograd state.
    """
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss = forward_torch(leaves, Xb, Yb)
    loss.backward()
    return loss.item(), {k: leaves[k].grad for k in PARAM_NAMES}


STEPS = {"generated": generated_step, "autograd": autograd_step}
