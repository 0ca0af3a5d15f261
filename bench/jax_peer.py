"""The JAX column of ``python -m bench.ops``: ``jax.jit`` of ``jax.vjp`` of the decomposed forward.

Imported only where JAX is installed (an optional peer, never a dependency of backgen): the
caller catches the ImportError and leaves the column out with a note. Every forward is
``bench.decomposed``'s formula in ``jax.numpy``; the whole forward and backward is one jitted
function, so XLA fuses both. For a scalar loss the cotangent is 1 and ``jax.vjp`` is
``jax.value_and_grad``. Arrays are converted once, before timing; the timed call ends in
``block_until_ready`` because JAX dispatches asynchronously.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import torch

jax.config.update("jax_enable_x64", True)  # float64 for the check; float32 stays float32
jax.config.update("jax_default_matmul_precision", "highest")  # no TF32 on GPUs, as torch
GELU_C = math.sqrt(2 / math.pi)
IGNORE = -1  # train.data.IGNORE: the padded targets of the GPT's sequences


def layernorm(x, gain, bias, eps):
    diff = x - x.mean(-1, keepdims=True)
    rstd = ((diff**2).mean(-1, keepdims=True) + eps) ** -0.5
    return gain * (diff * rstd) + bias


def gelu_tanh(x):
    return 0.5 * x * (1 + jnp.tanh(GELU_C * (x + 0.044715 * x**3)))


def batchnorm(x, gain, bias, eps):
    n = x.shape[0]
    bndiff = x - x.sum(0, keepdims=True) / n
    bnvar_inv = ((bndiff**2).sum(0, keepdims=True) / (n - 1) + eps) ** -0.5
    return gain * (bndiff * bnvar_inv) + bias


def softmax(x):
    counts = jnp.exp(x - x.max(-1, keepdims=True))
    return counts / counts.sum(-1, keepdims=True)


def log_softmax(x):
    maxes = x.max(-1, keepdims=True)
    return x - maxes - jnp.log(jnp.exp(x - maxes).sum(-1, keepdims=True))


def cross_entropy(logits, targets):
    logprobs = jnp.log(softmax(logits))
    return -jnp.take_along_axis(logprobs, targets[:, None], axis=1).mean()


def sequence_cross_entropy(logits, targets):
    counted = targets != IGNORE
    safe = jnp.where(counted, targets, 0)[..., None]
    picked = jnp.take_along_axis(log_softmax(logits), safe, axis=-1)[..., 0]
    return -(picked * counted).sum() / counted.sum()


def attention(x, Wqkv, bqkv, Wo, bo, n_head):
    B, T, C = x.shape
    q, k, v = jnp.split(x @ Wqkv + bqkv, 3, axis=2)
    q, k, v = (t.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(C // n_head))
    future = jnp.triu(jnp.ones((T, T), dtype=bool), 1)
    y = softmax(jnp.where(future, -jnp.inf, scores)) @ v
    return y.transpose(0, 2, 1, 3).reshape(B, T, C) @ Wo + bo


def gpt_loss(names: Sequence[str], n_layer: int, n_head: int, eps: float) -> Callable:
    """f(*params in ``names`` order, X, Y): the GPT's loss, as ``bench.decomposed.gpt_loss``."""

    def loss(*args):
        p, (X, Y) = dict(zip(names, args[:-2], strict=True)), args[-2:]
        x = p["wte"][X] + p["wpe"][jnp.arange(X.shape[1])]
        for layer in range(n_layer):
            q = {k.split(".", 1)[1]: v for k, v in p.items() if k.startswith(f"h{layer}.")}
            h = layernorm(x, q["ln1_gain"], q["ln1_bias"], eps)
            x = x + attention(h, q["Wqkv"], q["bqkv"], q["Wo"], q["bo"], n_head)
            h = gelu_tanh(layernorm(x, q["ln2_gain"], q["ln2_bias"], eps) @ q["W1"] + q["b1"])
            x = x + h @ q["W2"] + q["b2"]
        x = layernorm(x, p["lnf_gain"], p["lnf_bias"], eps)
        return sequence_cross_entropy(x @ p["lm_head"], Y)

    return loss


def mlp_loss(eps: float) -> Callable:
    """f(C, W1, b1, W2, b2, bngain, bnbias, X, Y): the makemore MLP's loss, the seed's order."""

    def loss(C, W1, b1, W2, b2, bngain, bnbias, X, Y):
        hprebn = C[X].reshape(X.shape[0], -1) @ W1 + b1
        h = jnp.tanh(batchnorm(hprebn, bngain, bnbias, eps))
        return cross_entropy(h @ W2 + b2, Y)

    return loss


def _to_jax(tensors: Sequence[torch.Tensor]) -> tuple:
    return tuple(jnp.asarray(t.detach().cpu().numpy()) for t in tensors)


def to_torch(arrays) -> list[torch.Tensor]:
    """JAX arrays back as torch tensors, for the check against autograd."""
    return [torch.from_numpy(np.array(a)) for a in arrays]


def fwd_bwd(forward: Callable) -> Callable:
    """run(floats, others, cotangent) -> (out, grads) on torch tensors, jitted once per dtype
    and shape; the conversion to JAX arrays is cached per input tuple and not timed."""

    def both(floats, others, cotangent):
        out, vjp = jax.vjp(lambda *f: forward(*f, *others), *floats)
        return out, vjp(cotangent)

    jitted = jax.jit(both)
    cache: dict[int, tuple] = {}

    def run(floats, others, cotangent):
        key = id(floats)
        if key not in cache:
            cache.clear()
            cache[key] = (floats, _to_jax(floats), _to_jax(others), *_to_jax([cotangent]))
        _, f, o, c = cache[key]
        return jax.block_until_ready(jitted(f, o, c))

    return run


def version() -> str:
    """'jax 0.x (cpu)': for the report's header."""
    return f"jax {jax.__version__} ({jax.default_backend()})"
