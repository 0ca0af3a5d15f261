"""The reference every row of ``python -m bench.ops`` is a ratio to: forwards in decomposed ops.

Each forward is written as its op file defines it (``ops/*.py``): one torch call per line of the
definition, every intermediate its own tensor, no fused kernel (no ``F.layer_norm``,
``F.softmax``, ``F.cross_entropy``). Autograd through these is what a user who writes the math
out gets, and what the generated backward replaces; the fused kernels are a separate column.
The same formulas in ``jax.numpy`` are ``bench.jax_peer``'s.
"""

from __future__ import annotations

import math

import torch

from train.data import IGNORE
from train.models.gpt_net import LN_EPS, block

GELU_C = math.sqrt(2 / math.pi)  # tanh GELU: 0.5 x (1 + tanh(c (x + 0.044715 x^3)))


def layernorm(x: torch.Tensor, gain, bias, eps: float) -> torch.Tensor:
    """mean = sum_c x / C; var = sum_c (x - mean)^2 / C; out = gain (x - mean) var^-1/2 + bias."""
    mean = x.mean(-1, keepdim=True)
    diff = x - mean
    var = (diff**2).mean(-1, keepdim=True)
    rstd = (var + eps) ** -0.5
    return gain * (diff * rstd) + bias


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """makemore's NewGELU, term by term."""
    return 0.5 * x * (1 + torch.tanh(GELU_C * (x + 0.044715 * x**3)))


def batchnorm(x: torch.Tensor, gain, bias, eps: float) -> torch.Tensor:
    """The seed's training-mode batchnorm: batch mean, Bessel-corrected (n-1) variance."""
    n = x.shape[0]
    bnmeani = 1 / n * x.sum(0, keepdim=True)
    bndiff = x - bnmeani
    bnvar = 1 / (n - 1) * (bndiff**2).sum(0, keepdim=True)
    bnvar_inv = (bnvar + eps) ** -0.5
    return gain * (bndiff * bnvar_inv) + bias


def softmax(x: torch.Tensor) -> torch.Tensor:
    """counts = exp(x - max); out = counts / sum(counts), over the last dimension."""
    counts = (x - x.max(-1, keepdim=True).values).exp()
    return counts / counts.sum(-1, keepdim=True)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """out = x - max - log(sum(exp(x - max))), over the last dimension."""
    maxes = x.max(-1, keepdim=True).values
    return x - maxes - (x - maxes).exp().sum(-1, keepdim=True).log()


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The seed's decomposed softmax cross-entropy, mean over the batch."""
    norm_logits = logits - logits.max(1, keepdim=True).values
    counts = norm_logits.exp()
    probs = counts * counts.sum(1, keepdim=True) ** -1
    logprobs = probs.log()
    return -logprobs[torch.arange(logits.shape[0], device=logits.device), targets].mean()


def sequence_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean of -log softmax at the target over the positions whose target is not IGNORE."""
    logprobs = log_softmax(logits)
    counted = targets != IGNORE
    picked = logprobs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * counted).sum() / counted.sum()


def attention(x: torch.Tensor, Wqkv, bqkv, Wo, bo, n_head: int) -> torch.Tensor:
    """makemore's CausalSelfAttention with its softmax written out (``softmax`` above)."""
    B, T, C = x.shape
    q, k, v = (x @ Wqkv + bqkv).split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // n_head))
    future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
    probs = softmax(scores.masked_fill(future, float("-inf")))
    y = (probs @ v).transpose(1, 2).reshape(B, T, C)
    return y @ Wo + bo


def gpt_loss(
    params: dict[str, torch.Tensor], X: torch.Tensor, Y: torch.Tensor, n_layer: int, n_head: int
) -> torch.Tensor:
    """makemore's GPT (``train.models.gpt_net``'s block order) on the forwards above."""
    x = params["wte"][X] + params["wpe"][torch.arange(X.shape[1], device=X.device)]
    for layer in range(n_layer):
        g1, b1_, Wqkv, bqkv, Wo, bo, g2, b2_, W1, b1, W2, b2 = block(params, layer)
        x = x + attention(layernorm(x, g1, b1_, LN_EPS), Wqkv, bqkv, Wo, bo, n_head)
        x = x + gelu_tanh(layernorm(x, g2, b2_, LN_EPS) @ W1 + b1) @ W2 + b2
    x = layernorm(x, params["lnf_gain"], params["lnf_bias"], LN_EPS)
    return sequence_cross_entropy(x @ params["lm_head"], Y)
