"""One GPT training step's loss and gradients: generated modules chained by hand, or autograd.

``generated_step`` runs the forward through generated/ (embedding, layernorm,
causal_self_attention, linear, gelu or gelu_tanh, sequence_cross_entropy), keeping each op's
``saved``, then every backward in reverse, one visible call per op; no ``loss.backward()``. A
residual ``x + f(x)`` sends its gradient down both paths, so the backward adds the branch's
dx to the running one. ``autograd_step`` is the same model through ``train.gpt.model``'s
plain torch forward and ``loss.backward()``.

``weight`` is the loss's own gradient, ``dloss/dloss``: 1 on one process. With several, each
process's loss is the mean over its own counted positions, so it is weighted by its share of
the global batch's counted positions, and the weighted gradients sum to the one-process ones.
Both return the weighted loss as a tensor (no ``.item()``, so the step compiles whole).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from generated import (
    causal_self_attention,
    embedding,
    gelu,
    gelu_tanh,
    layernorm,
    linear,
    sequence_cross_entropy,
)
from train.gpt.config import GPTConfig
from train.gpt.model import BLOCK_PARAMS, LN_EPS, Params, block, logits_torch, loss_torch

Grads = dict[str, torch.Tensor]
StepFn = Callable[[Params, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, Grads]]
GELU = {"tanh": gelu_tanh, "erf": gelu}


def block_forward(
    x: torch.Tensor, p: list[torch.Tensor], config: GPTConfig
) -> tuple[torch.Tensor, tuple]:
    """One pre-norm block, ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``, and what each op saved."""
    B, T, C = x.shape
    g1, b1_, Wqkv, bqkv, Wo, bo, g2, b2_, W1, b1, W2, b2 = p
    h, ln1 = layernorm.forward(x, g1, b1_, eps=LN_EPS)
    a, attn = causal_self_attention.forward(h, Wqkv, bqkv, Wo, bo, n_head=config.n_head)
    x = x + a
    h, ln2 = layernorm.forward(x, g2, b2_, eps=LN_EPS)
    u, fc = linear.forward(h.reshape(B * T, C), W1, b1)  # (B*T, 4C)
    u, act = GELU[config.gelu].forward(u)
    m, proj = linear.forward(u, W2, b2)
    return x + m.view(B, T, C), (ln1, attn, ln2, fc, act, proj)


def block_backward(
    dx: torch.Tensor, saved: tuple, config: GPTConfig
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """``block_forward``'s ops in reverse: dx of the block's input, and its parameters' grads in
    ``BLOCK_PARAMS`` order. A residual sends dx down both paths: the branch's dx is added."""
    B, T, C = dx.shape
    ln1, attn, ln2, fc, act, proj = saved
    du, dW2, db2 = linear.backward(dx.reshape(B * T, C), proj)
    (du,) = GELU[config.gelu].backward(du, act)
    dh, dW1, db1 = linear.backward(du, fc)
    dh, dg2, db2_ = layernorm.backward(dh.view(B, T, C), ln2)
    dx = dx + dh
    da, dWqkv, dbqkv, dWo, dbo = causal_self_attention.backward(dx, attn)
    dh, dg1, db1_ = layernorm.backward(da, ln1)
    return dx + dh, (dg1, db1_, dWqkv, dbqkv, dWo, dbo, dg2, db2_, dW1, db1, dW2, db2)


def generated_step(
    params: Params, X: torch.Tensor, Y: torch.Tensor, weight: torch.Tensor, *, config: GPTConfig
) -> tuple[torch.Tensor, Grads]:
    """Loss and every parameter's gradient through generated/ forwards and backwards."""
    B, T = X.shape
    lm_head = params["lm_head"]
    no_bias = lm_head.new_zeros(lm_head.shape[1])  # the head is bias-free; its db is dropped

    # forward, keeping what each op saved for its backward
    tok, tok_saved = embedding.forward(X, params["wte"])  # (B, T, C)
    positions = torch.arange(T, device=X.device).expand(B, T)
    pos, pos_saved = embedding.forward(positions, params["wpe"])  # dwpe sums over the batch
    x, saved = tok + pos, []
    for layer in range(config.n_layer):
        x, block_saved = block_forward(x, block(params, layer), config)
        saved.append(block_saved)
    h, lnf = layernorm.forward(x, params["lnf_gain"], params["lnf_bias"], eps=LN_EPS)
    logits, head = linear.forward(h.reshape(B * T, -1), lm_head, no_bias)
    loss, ce = sequence_cross_entropy.forward(logits.view(B, T, -1), Y)

    # backward, in reverse, from dloss = weight
    grads: Grads = {}
    dlogits, _ = sequence_cross_entropy.backward(weight.to(loss.dtype), ce)
    dh, grads["lm_head"], _ = linear.backward(dlogits.reshape(B * T, -1), head)
    dx, grads["lnf_gain"], grads["lnf_bias"] = layernorm.backward(dh.view(x.shape), lnf)
    for layer in reversed(range(config.n_layer)):
        dx, block_grads = block_backward(dx, saved[layer], config)
        grads.update({f"h{layer}.{k}": g for k, g in zip(BLOCK_PARAMS, block_grads, strict=True)})
    _, grads["wpe"] = embedding.backward(dx, pos_saved)
    _, grads["wte"] = embedding.backward(dx, tok_saved)
    return loss.detach() * weight, grads


def autograd_step(
    params: Params, X: torch.Tensor, Y: torch.Tensor, weight: torch.Tensor, *, config: GPTConfig
) -> tuple[torch.Tensor, Grads]:
    """Same model and batch: plain torch forward and ``loss.backward()``, on detached leaves."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss = loss_torch(logits_torch(leaves, X, config), Y) * weight
    loss.backward()
    return loss.detach(), {k: leaves[k].grad for k in params}


STEPS = {"generated": generated_step, "autograd": autograd_step}


def make_step(config: GPTConfig, compile: bool = False) -> StepFn:
    """The config's step, bound to its sizes; ``compile``: under ``torch.compile``."""
    fn = partial(STEPS[config.backward], config=config)
    return torch.compile(fn) if compile else fn
