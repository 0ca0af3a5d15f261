"""One table of op specs drives the numeric tests: each op with an independent torch reference,
a maker of random inputs for a given size seed, and its own input ranges."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from generated import (
    avg_pool2d,
    batchnorm,
    causal_conv1d,
    causal_self_attention,
    conv1d,
    conv2d,
    cross_entropy,
    cumsum,
    embedding,
    gelu,
    gelu_tanh,
    layernorm,
    linear,
    log_softmax,
    logsumexp,
    max_pool2d,
    relu,
    sequence_cross_entropy,
    sigmoid,
    softmax,
    tanh,
)


@dataclass(frozen=True)
class OpSpec:
    name: str
    module: object
    reference: Callable[..., torch.Tensor]  # plain torch, differentiated by autograd
    make: Callable[..., list[torch.Tensor]]  # (rng, gen, dtype, **params) -> inputs
    # params drawn first from the same seeded rng (n_head), passed to make, forward, reference
    draw_params: Callable[[random.Random], dict] | None = None

    def draw(self, seed: int, dtype: torch.dtype = torch.float64) -> tuple[list, dict]:
        """The inputs and params of one seed of the sweep (the same for the same seed)."""
        rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
        params = self.draw_params(rng) if self.draw_params else {}
        return self.make(rng, gen, dtype, **params), params


def _bn_reference(x, gain, bias, eps=1e-5):
    mean = x.mean(0, keepdim=True)
    var = x.var(0, keepdim=True, unbiased=True)
    return gain * (x - mean) / torch.sqrt(var + eps) + bias


def _make_linear(rng, gen, dtype):
    n, d, m = (rng.randint(1, 9) for _ in range(3))
    return [torch.randn(n, d, generator=gen, dtype=dtype) for _ in range(1)] + [
        torch.randn(d, m, generator=gen, dtype=dtype),
        torch.randn(m, generator=gen, dtype=dtype),
    ]


def _make_tanh(rng, gen, dtype):
    shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(0, 3)))
    return [torch.randn(shape, generator=gen, dtype=dtype) * 2]


def _make_embedding(rng, gen, dtype):
    v, e = rng.randint(1, 8), rng.randint(1, 6)
    shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(1, 3)))
    return [
        torch.randint(0, v, shape, generator=gen),
        torch.randn(v, e, generator=gen, dtype=dtype),
    ]


def _make_batchnorm(rng, gen, dtype):
    n, m = rng.randint(2, 10), rng.randint(1, 7)
    return [
        torch.randn(n, m, generator=gen, dtype=dtype) * 3 + 1,
        torch.randn(m, generator=gen, dtype=dtype) * 0.1 + 1,
        torch.randn(m, generator=gen, dtype=dtype) * 0.1,
    ]


def _make_cross_entropy(rng, gen, dtype):
    n, c = rng.randint(1, 10), rng.randint(1, 8)
    return [
        torch.randn(n, c, generator=gen, dtype=dtype) * 3,
        torch.randint(0, c, (n,), generator=gen),
    ]


def _make_rows(rng, gen, dtype):
    # x[..., C]: one to three leading dims, rows of 1 to 7 entries, spread for range
    shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 3))) + (rng.randint(1, 7),)
    return [torch.randn(shape, generator=gen, dtype=dtype) * 3]


def _make_relu(rng, gen, dtype):
    (x,) = _make_tanh(rng, gen, dtype)
    return [torch.where(x.abs() < 0.05, torch.zeros_like(x), x)]  # the kink itself included


def _make_layernorm(rng, gen, dtype):
    (x,) = _make_rows(rng, gen, dtype)
    c = x.shape[-1]
    return [
        x,
        torch.randn(c, generator=gen, dtype=dtype) * 0.1 + 1,
        torch.randn(c, generator=gen, dtype=dtype),
    ]


def attention_reference(x, Wqkv, bqkv, Wo, bo, n_head=4):
    """makemore's CausalSelfAttention in plain torch: c_attn, split, heads, SDPA, c_proj."""
    B, T, C = x.shape
    q, k, v = (x @ Wqkv + bqkv).split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).contiguous().view(B, T, C) @ Wo + bo


def _make_attention(rng, gen, dtype, n_head):
    b, t, c = rng.randint(1, 3), rng.randint(1, 6), n_head * rng.randint(1, 3)
    return [
        torch.randn(b, t, c, generator=gen, dtype=dtype),
        torch.randn(c, 3 * c, generator=gen, dtype=dtype) / c**0.5,
        torch.randn(3 * c, generator=gen, dtype=dtype) * 0.1,
        torch.randn(c, c, generator=gen, dtype=dtype) / c**0.5,
        torch.randn(c, generator=gen, dtype=dtype) * 0.1,
    ]


def _draw_window(rng):
    """F.conv*d's stride, padding and dilation, drawn so that odd sizes and stride > 1 occur."""
    stride, padding, dilation = rng.randint(1, 3), rng.randint(0, 2), rng.randint(1, 2)
    return {"stride": stride, "padding": padding, "dilation": dilation}  # as ops/ declare them


def _draw_grouped_window(rng):
    """F.conv2d's params: a window's, and groups of 1 to 3 (odd channel counts included)."""
    return {**_draw_window(rng), "groups": rng.randint(1, 3)}  # Function.apply's order


def _make_conv(rng, gen, dtype, stride, padding, dilation, groups=1, dims=1):
    n, c, o = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 4)
    if groups > 1:  # C and O multiples of groups, w reading C / groups channels
        c, o = groups * rng.randint(1, 2), groups * rng.randint(1, 2)
    ks = [rng.randint(1, 3) for _ in range(dims)]
    sizes = [rng.randint(max(1, dilation * (k - 1) + 1 - 2 * padding), 9) for k in ks]
    return [
        torch.randn(n, c, *sizes, generator=gen, dtype=dtype),
        torch.randn(o, c // groups, *ks, generator=gen, dtype=dtype),
        torch.randn(o, generator=gen, dtype=dtype),
    ]


def max_pool2d_reference(x, kernel_size, stride):
    """F.max_pool2d, each channel pooled as an image of its own: the same numbers, and a C of 0
    is then an empty batch (F.max_pool2d refuses C = 0 though N = 0 is fine)."""
    n, c, h, w = x.shape
    out = F.max_pool2d(x.reshape(n * c, 1, h, w), kernel_size, stride)
    return out.reshape(n, c, *out.shape[2:])


def avg_pool2d_reference(x, kernel_size, padding, stride):
    """F.avg_pool2d (count_include_pad=True, its default), each channel as an image of its own
    as in max_pool2d_reference."""
    n, c, h, w = x.shape
    out = F.avg_pool2d(x.reshape(n * c, 1, h, w), kernel_size, stride, padding)
    return out.reshape(n, c, *out.shape[2:])


def _draw_pool(rng):
    return {"kernel_size": rng.randint(1, 3), "stride": rng.randint(1, 3)}


def _draw_padded_pool(rng):
    """F.avg_pool2d takes a padding of at most half the kernel."""
    kernel = rng.randint(1, 4)
    padding, stride = rng.randint(0, kernel // 2), rng.randint(1, 3)
    return {"kernel_size": kernel, "stride": stride, "padding": padding}  # as ops/ declares


def _make_padded_pool(rng, gen, dtype, kernel_size, padding, stride):
    n, c = rng.randint(1, 3), rng.randint(1, 3)
    low = max(1, kernel_size - 2 * padding)
    h, w = rng.randint(low, 9), rng.randint(low, 9)
    return [torch.randn(n, c, h, w, generator=gen, dtype=dtype)]


def causal_conv1d_reference(x, w, b):
    """The depthwise causal conv as torch's layers write it (Mamba's conv1d): padded K - 1 on
    both sides by F.conv1d, the last K - 1 positions (which read the future) cut."""
    c, k = w.shape
    return F.conv1d(x, w[:, None], b, padding=k - 1, groups=c)[..., : x.shape[-1]]


def _make_causal_conv(rng, gen, dtype):
    n, c, t, k = rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 9), rng.randint(1, 4)
    return [
        torch.randn(n, c, t, generator=gen, dtype=dtype),
        torch.randn(c, k, generator=gen, dtype=dtype),
        torch.randn(c, generator=gen, dtype=dtype),
    ]


def _make_pool(rng, gen, dtype, kernel_size, stride):
    n, c = rng.randint(1, 3), rng.randint(1, 3)
    h, w = rng.randint(kernel_size, 9), rng.randint(kernel_size, 9)
    return [torch.randn(n, c, h, w, generator=gen, dtype=dtype)]


def sequence_ce_reference(logits, targets):
    """F.cross_entropy over every position, a target of -1 ignored (makemore's padding)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)


def _make_sequence_ce(rng, gen, dtype):
    b, t, v = rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 7)
    targets = torch.randint(-1, v, (b, t), generator=gen)
    targets.view(-1)[rng.randrange(b * t)] = rng.randrange(v)  # at least one counted position
    return [torch.randn(b, t, v, generator=gen, dtype=dtype) * 3, targets]


OPS = [
    OpSpec("linear", linear, lambda x, W, b: x @ W + b, _make_linear),
    OpSpec("tanh", tanh, torch.tanh, _make_tanh),
    OpSpec("embedding", embedding, lambda idx, C: C[idx], _make_embedding),
    OpSpec("batchnorm", batchnorm, _bn_reference, _make_batchnorm),
    OpSpec("cross_entropy", cross_entropy, F.cross_entropy, _make_cross_entropy),
    OpSpec("relu", relu, torch.relu, _make_relu),
    OpSpec("sigmoid", sigmoid, torch.sigmoid, _make_tanh),
    OpSpec("softmax", softmax, lambda x: torch.softmax(x, -1), _make_rows),
    OpSpec("log_softmax", log_softmax, lambda x: torch.log_softmax(x, -1), _make_rows),
    OpSpec("logsumexp", logsumexp, lambda x: torch.logsumexp(x, -1), _make_rows),
    OpSpec(
        "layernorm",
        layernorm,
        lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5),
        _make_layernorm,
    ),
    OpSpec("gelu_tanh", gelu_tanh, lambda x: F.gelu(x, approximate="tanh"), _make_tanh),
    OpSpec("gelu", gelu, F.gelu, _make_tanh),
    OpSpec(
        "causal_self_attention",
        causal_self_attention,
        attention_reference,
        _make_attention,
        lambda rng: {"n_head": rng.randint(1, 3)},
    ),
    OpSpec(
        "sequence_cross_entropy", sequence_cross_entropy, sequence_ce_reference, _make_sequence_ce
    ),
    OpSpec("conv1d", conv1d, F.conv1d, _make_conv, _draw_grouped_window),
    OpSpec(
        "conv2d",
        conv2d,
        F.conv2d,
        lambda *a, **p: _make_conv(*a, **p, dims=2),
        _draw_grouped_window,
    ),
    OpSpec("max_pool2d", max_pool2d, max_pool2d_reference, _make_pool, _draw_pool),
    OpSpec("avg_pool2d", avg_pool2d, avg_pool2d_reference, _make_padded_pool, _draw_padded_pool),
    OpSpec("causal_conv1d", causal_conv1d, causal_conv1d_reference, _make_causal_conv),
    OpSpec("cumsum", cumsum, lambda x: torch.cumsum(x, -1), _make_rows),
]


# A user's own op file, as the README's "add your own op" writes it (test_user_op, test_show).
SIGMOID = """
from derive import Op

OP = Op(
    name="sigmoid",
    doc="Element-wise logistic sigmoid.",
    inputs=["x[N, M]"],
    definitions=["out[n, m] = 1 / (1 + exp(-x[n, m]))"],
)
"""
