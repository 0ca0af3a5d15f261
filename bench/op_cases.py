"""The rows of ``python -m bench.ops``: one forward and backward each, written five ways.

A row (``Case``) holds its inputs and the same function as: the decomposed forward
(``bench.decomposed``, autograd's reference), torch's fused op, the generated forward and
backward chained by hand, and the JAX forward (``bench.jax_peer``). Inputs are drawn in
float64 from one seeded generator, so a float32 run sees the same numbers rounded. An op with a
tensor output is differentiated along a fixed random cotangent (``grad_out``); a loss along 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch
import torch.nn.functional as F

from bench import decomposed
from bench.gpt import SIZES as GPT_SIZES
from bench.gpt import GPTSize
from bench.gpt import problem as gpt_problem
from bench.problem import SIZES as MLP_SIZES
from bench.problem import Size, make_problem
from bench.variants import decomposed_loss
from generated import (
    batchnorm,
    causal_self_attention,
    cross_entropy,
    gelu_tanh,
    layernorm,
    log_softmax,
    softmax,
)
from train.models.gpt import GPTConfig, generated_step
from train.models.gpt_net import LN_EPS, logits_torch, loss_torch
from train.models.mlp import generated_loss_and_grads
from train.models.mlp_net import BN_EPS, PARAM_NAMES, forward_torch

SEED = 1234
Tensors = tuple[torch.Tensor, ...]
# generated(floats, others, cotangent) -> (out, gradients of the floats)
FwdBwd = Callable[[Tensors, Tensors, torch.Tensor], tuple[torch.Tensor, Tensors]]


@dataclass(frozen=True)
class Inputs:
    """Differentiated inputs, the others (integer targets, tokens), and d(loss)/d(out)."""

    floats: Tensors
    others: Tensors
    cotangent: torch.Tensor

    def to(self, dtype: torch.dtype) -> Inputs:
        floats = tuple(t.to(dtype) for t in self.floats)
        return replace(self, floats=floats, cotangent=self.cotangent.to(dtype))


@dataclass(frozen=True)
class Case:
    """One row: ``key`` selects it (``--rows``), ``title`` names it with its sizes."""

    key: str
    title: str
    fused_label: str
    make: Callable[[str], Inputs]  # float64 inputs on a device
    decomposed: Callable[..., torch.Tensor]  # f(*floats, *others) -> out
    fused: Callable[..., torch.Tensor]
    generated: FwdBwd
    jax: Callable[[object], Callable]  # jax_peer -> f(*floats, *others), built only with JAX


def _draw(*shape: int, scale: float = 1.0, shift: float = 0.0, g: torch.Generator):
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift


def _chained(module, **params) -> FwdBwd:
    """The generated forward, then its backward: the floats come first in every op used here."""

    def run(floats: Tensors, others: Tensors, cotangent: torch.Tensor):
        out, saved = module.forward(*floats, *others, **params)
        return out, tuple(module.backward(cotangent, saved)[: len(floats)])

    return run


def _elementwise_inputs(shape: tuple[int, ...], n_affine: int, scale: float = 1.0):
    """x of ``shape`` (and a gain near 1 and a small bias over its last axis), a cotangent."""

    def make(device: str) -> Inputs:
        g = torch.Generator().manual_seed(SEED)
        floats = [_draw(*shape, scale=scale, shift=0.1, g=g)]
        if n_affine:
            floats += [
                _draw(shape[-1], scale=0.1, shift=1.0, g=g),
                _draw(shape[-1], scale=0.1, g=g),
            ]
        cot = _draw(*shape, g=g)
        return Inputs(tuple(t.to(device) for t in floats), (), cot.to(device))

    return make


def layernorm_case(key: str, n: int, c: int) -> Case:
    return Case(
        key,
        f"layernorm ({n}, {c})",
        "F.layer_norm",
        _elementwise_inputs((n, c), 2),
        partial(decomposed.layernorm, eps=LN_EPS),
        lambda x, gain, bias: F.layer_norm(x, (x.shape[-1],), gain, bias, LN_EPS),
        _chained(layernorm, eps=LN_EPS),
        lambda jp: partial(jp.layernorm, eps=LN_EPS),
    )


def gelu_case(n: int, c: int) -> Case:
    return Case(
        "gelu_tanh",
        f"GELU-tanh ({n}, {c})",
        "F.gelu(tanh)",
        _elementwise_inputs((n, c), 0, scale=2.0),
        decomposed.gelu_tanh,
        lambda x: F.gelu(x, approximate="tanh"),
        _chained(gelu_tanh),
        lambda jp: jp.gelu_tanh,
    )


def _batchnorm_fused(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``F.batch_norm`` normalises by the biased variance v_b = v (n-1)/n; with n/(n-1) folded in,
    (x - mu) / sqrt(v + eps) = sqrt((n-1)/n) (x - mu) / sqrt(v_b + eps (n-1)/n): one fused
    kernel computing the n-1 batchnorm exactly, the factor on the gain."""
    shrink = (x.shape[0] - 1) / x.shape[0]
    weight = gain * math.sqrt(shrink)
    return F.batch_norm(x, None, None, weight, bias, training=True, eps=BN_EPS * shrink)


def batchnorm_case(n: int, m: int) -> Case:
    return Case(
        "batchnorm",
        f"batchnorm n-1 ({n}, {m})",
        "F.batch_norm",
        _elementwise_inputs((n, m), 2, scale=2.0),
        partial(decomposed.batchnorm, eps=BN_EPS),
        _batchnorm_fused,
        _chained(batchnorm, eps=BN_EPS),
        lambda jp: partial(jp.batchnorm, eps=BN_EPS),
    )


def _softmax_like(key: str, n: int, c: int, op, fused, fused_label: str) -> Case:
    return Case(
        key,
        f"{key} ({n}, {c})",
        fused_label,
        _elementwise_inputs((n, c), 0, scale=2.0),
        getattr(decomposed, key),
        fused,
        _chained(op),
        lambda jp: getattr(jp, key),
    )


def cross_entropy_case(n: int, c: int) -> Case:
    def make(device: str) -> Inputs:
        g = torch.Generator().manual_seed(SEED)
        logits, targets = _draw(n, c, scale=2.0, g=g), torch.randint(0, c, (n,), generator=g)
        one = torch.ones((), dtype=torch.float64)
        return Inputs((logits.to(device),), (targets.to(device),), one.to(device))

    return Case(
        "cross_entropy",
        f"softmax-CE ({n}, {c})",
        "F.cross_entropy",
        make,
        decomposed.cross_entropy,
        F.cross_entropy,
        _chained(cross_entropy),
        lambda jp: jp.cross_entropy,
    )


def _attention_fused(x, Wqkv, bqkv, Wo, bo, n_head: int) -> torch.Tensor:
    """makemore's attention with ``F.scaled_dot_product_attention(is_causal=True)``."""
    B, T, C = x.shape
    q, k, v = (x @ Wqkv + bqkv).split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).reshape(B, T, C) @ Wo + bo


def attention_case(key: str, B: int, T: int, C: int, H: int) -> Case:
    def make(device: str) -> Inputs:
        g = torch.Generator().manual_seed(SEED)
        s = 1 / math.sqrt(C)
        floats = (
            _draw(B, T, C, g=g),
            _draw(C, 3 * C, scale=s, g=g),
            _draw(3 * C, scale=0.1, g=g),
            _draw(C, C, scale=s, g=g),
            _draw(C, scale=0.1, g=g),
        )
        cot = _draw(B, T, C, g=g)
        return Inputs(tuple(t.to(device) for t in floats), (), cot.to(device))

    return Case(
        key,
        f"causal attention B{B} T{T} C{C} H{H}",
        "sdpa",
        make,
        partial(decomposed.attention, n_head=H),
        partial(_attention_fused, n_head=H),
        _chained(causal_self_attention, n_head=H),
        lambda jp: partial(jp.attention, n_head=H),
    )


def gpt_case(key: str, size: GPTSize) -> Case:
    """The GPT's loss and every parameter's gradient; fused: ``train.models.gpt_net``'s torch
    model (``F.layer_norm``, ``F.gelu``, ``F.softmax``, ``F.cross_entropy``), autograd's backend."""
    config = GPTConfig(n_layer=size.n_layer, n_head=size.n_head, n_embd=size.n_embd)
    names = tuple(gpt_problem(size, torch.float64, "cpu")[1])  # parameter names, in order

    def make(device: str) -> Inputs:
        _, params, batches = gpt_problem(size, torch.float64, device)
        one = torch.ones((), dtype=torch.float64, device=device)
        return Inputs(tuple(params.values()), batches[0], one)

    def generated(floats: Tensors, others: Tensors, cotangent: torch.Tensor):
        loss, grads = generated_step(dict(zip(names, floats)), *others, cotangent, config=config)
        return loss, tuple(grads[k] for k in names)

    return Case(
        key,
        f"GPT step, B{size.batch} T{size.block} C{size.n_embd} L{size.n_layer}",
        "fused-op model",
        make,
        lambda *a: decomposed.gpt_loss(
            dict(zip(names, a[:-2])), *a[-2:], size.n_layer, size.n_head
        ),
        lambda *a: loss_torch(logits_torch(dict(zip(names, a[:-2])), a[-2], config), a[-1]),
        generated,
        lambda jp: jp.gpt_loss(names, size.n_layer, size.n_head, LN_EPS),
    )


def mlp_case(key: str, size: Size) -> Case:
    """The makemore MLP's loss and gradients (no update: ``python -m bench`` times the step)."""

    def make(device: str) -> Inputs:
        problem = make_problem(size, device).to(torch.float64)
        one = torch.ones((), dtype=torch.float64, device=device)
        return Inputs(tuple(problem.params[k] for k in PARAM_NAMES), problem.batches[0], one)

    def generated(floats: Tensors, others: Tensors, cotangent: torch.Tensor):
        return generated_loss_and_grads(dict(zip(PARAM_NAMES, floats)), *others)

    return Case(
        key,
        f"MLP step, batch {size.batch}, hidden {size.n_hidden}",
        "fused autograd (B)",
        make,
        lambda *a: decomposed_loss(dict(zip(PARAM_NAMES, a[:-2])), *a[-2:]),
        lambda *a: forward_torch(dict(zip(PARAM_NAMES, a[:-2])), *a[-2:]),
        generated,
        lambda jp: jp.mlp_loss(BN_EPS),
    )


def cases(tiny: bool = False) -> list[Case]:
    """Issue 27's table, in its order; ``tiny``: the same rows at sizes that run in milliseconds."""
    n, c, v = (8, 16, 10) if tiny else (4096, 1024, 1000)
    gpt_small = GPTSize("tiny", 2, 4, 8, n_layer=1, n_head=2) if tiny else GPT_SIZES["makemore"]
    gpt_large = GPTSize("tiny2", 2, 4, 16, n_layer=1, n_head=4) if tiny else GPT_SIZES["large"]
    mlp_sizes = [MLP_SIZES[k] for k in ("makemore", "medium", "large")]
    mlp = [Size("tiny", 4 * k, 8) for k in (1, 2, 3)] if tiny else mlp_sizes
    att = [(2, 4, 8, 2), (2, 4, 16, 4)] if tiny else [(32, 16, 64, 4), (64, 64, 256, 8)]
    return [
        gpt_case("gpt-makemore", gpt_small),
        gpt_case("gpt-large", gpt_large),
        attention_case("attention-makemore", *att[0]),
        attention_case("attention-large", *att[1]),
        layernorm_case("layernorm-large", n, c),
        layernorm_case("layernorm-gpt", *((4, 8) if tiny else (512, 64))),
        gelu_case(n, 8 if tiny else 4096),
        batchnorm_case(n, 8 if tiny else 4096),
        cross_entropy_case(n, v),
        _softmax_like("softmax", n, v, softmax, lambda x: F.softmax(x, -1), "F.softmax"),
        _softmax_like(
            "log_softmax", n, v, log_softmax, lambda x: F.log_softmax(x, -1), "F.log_softmax"
        ),
        mlp_case("mlp-makemore", mlp[0]),
        mlp_case("mlp-medium", mlp[1]),
        mlp_case("mlp-large", mlp[2]),
    ]
