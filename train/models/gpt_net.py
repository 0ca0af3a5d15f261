"""makemore's GPT: parameters, the plain-torch forward (autograd's side), evaluation, sampling.

token + position embeddings -> n_layer pre-norm blocks -> final layernorm -> bias-free head:

    x = x + attn(ln1(x))          attn: causal self-attention, n_head heads
    x = x + mlp(ln2(x))           mlp: Linear(C, 4C) -> GELU -> Linear(4C, C)

Weights use the seeds' ``x @ W`` layout (W is (in, out)). The generated step that trains it
lives in the spec (``train.models.gpt``); this module is what both backwards and inference
share, and the memory a model and batch need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from train.data import IGNORE

if TYPE_CHECKING:
    from train.models.gpt import GPTConfig

LN_EPS = 1e-5
Params = dict[str, torch.Tensor]
BLOCK_PARAMS = ("ln1_gain", "ln1_bias", "Wqkv", "bqkv", "Wo", "bo")
BLOCK_PARAMS += ("ln2_gain", "ln2_bias", "W1", "b1", "W2", "b2")


@dataclass(frozen=True)
class Shape:
    """The sizes that fix every parameter's shape."""

    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int


def block_shapes(C: int) -> dict[str, tuple[int, ...]]:
    """One block's parameters, in ``BLOCK_PARAMS`` order."""
    sizes = [(C,), (C,), (C, 3 * C), (3 * C,), (C, C), (C,), (C,), (C,)]
    return dict(zip(BLOCK_PARAMS, sizes + [(C, 4 * C), (4 * C,), (4 * C, C), (C,)], strict=True))


def param_shapes(s: Shape) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in the order they are initialised and stored."""
    C = s.n_embd
    shapes = {"wte": (s.vocab_size, C), "wpe": (s.block_size, C)}
    for layer in range(s.n_layer):
        shapes.update({f"h{layer}.{k}": v for k, v in block_shapes(C).items()})
    shapes.update({"lnf_gain": (C,), "lnf_bias": (C,), "lm_head": (C, s.vocab_size)})
    return shapes


def step_bytes(s: Shape, batch_size: int, dtype: str) -> int:
    """Estimated peak bytes of a step, in items of the dtype: parameters with their gradients,
    AdamW's two moments and the float64 draw of the initialisation (~6 per parameter); per
    position of a batch about 20 activations of width n_embd per layer, the attention weights
    (6 per head per position it sees: the forward's scores, their mask and the probabilities,
    and the backward's three of that shape; counted 3, a 500-character word's step outgrew
    it) and 3 of the vocabulary. An estimate, as the MLP's."""
    C, L, H, V, T = s.n_embd, s.n_layer, s.n_head, s.vocab_size, s.block_size
    n_params = 2 * V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    per_position = L * (20 * C + 6 * H * T) + 3 * V
    item = 8 if dtype == "float64" else 4
    return (6 * n_params + batch_size * T * per_position) * item


def init_params(s: Shape, g: torch.Generator, dtype: torch.dtype) -> Params:
    """torch's module defaults, as makemore (which has no init of its own) gets them.

    Embeddings N(0, 1); a Linear's weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in));
    layernorm gain 1 and bias 0. One generator draws them in ``param_shapes`` order.
    """
    params, fan_in = {}, None
    for name, shape in param_shapes(s).items():
        leaf = name.rsplit(".", 1)[-1]
        if name in ("wte", "wpe"):
            p = torch.randn(shape, generator=g, dtype=torch.float64)
        elif leaf.endswith("_gain"):
            p = torch.ones(shape, dtype=torch.float64)
        elif leaf.endswith("_bias"):
            p = torch.zeros(shape, dtype=torch.float64)
        else:  # a weight (in, out) sets fan_in for the bias that follows it
            fan_in = shape[0] if len(shape) == 2 else fan_in
            bound = 1 / math.sqrt(fan_in)
            p = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * bound
        params[name] = p.to(dtype)
    return params


def block(params: Params, layer: int) -> list[torch.Tensor]:
    """Block ``layer``'s parameters in ``BLOCK_PARAMS`` order."""
    return [params[f"h{layer}.{k}"] for k in BLOCK_PARAMS]


def attention_torch(x: torch.Tensor, Wqkv, bqkv, Wo, bo, n_head: int) -> torch.Tensor:
    """makemore's CausalSelfAttention in plain torch ops: the reference for autograd."""
    B, T, C = x.shape
    q, k, v = (x @ Wqkv + bqkv).split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // n_head))
    future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
    att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    return y @ Wo + bo


def logits_torch(params: Params, X: torch.Tensor, config: GPTConfig) -> torch.Tensor:
    """(B, T) tokens -> (B, T, V) logits through plain torch ops (autograd tracks them)."""
    T, C = X.shape[1], config.n_embd
    x = params["wte"][X] + params["wpe"][torch.arange(T, device=X.device)]
    approximate = "tanh" if config.gelu == "tanh" else "none"
    for layer in range(config.n_layer):
        g1, b1_, Wqkv, bqkv, Wo, bo, g2, b2_, W1, b1, W2, b2 = block(params, layer)
        x = x + attention_torch(
            F.layer_norm(x, (C,), g1, b1_, LN_EPS), Wqkv, bqkv, Wo, bo, config.n_head
        )
        h = F.gelu(F.layer_norm(x, (C,), g2, b2_, LN_EPS) @ W1 + b1, approximate=approximate)
        x = x + (h @ W2 + b2)
    x = F.layer_norm(x, (C,), params["lnf_gain"], params["lnf_bias"], LN_EPS)
    return x @ params["lm_head"]


def loss_torch(logits: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the positions whose target is not padding."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y.reshape(-1), ignore_index=IGNORE)


EVAL_WEIGHTS = 1024 * 16 * 16  # words x positions**2 a split's loss takes at once (makemore's)


@torch.no_grad()
def split_loss(params: Params, X: torch.Tensor, Y: torch.Tensor, config: GPTConfig) -> float:
    """The loss over a whole split, per counted position, in batches of words whose attention
    weights are no larger than the training step's: 1,024 words of makemore's 16 positions,
    fewer of longer ones (a fixed 1,024 of a 2,001-character word's attention took 20 GB past
    the memory check, which counts the training batch; found by probing)."""
    rows = max(config.batch_size, EVAL_WEIGHTS // max(X.shape[1], 1) ** 2)
    total, count = 0.0, 0
    for i in range(0, X.shape[0], rows):
        Xb, Yb = X[i : i + rows], Y[i : i + rows]
        n = int((Yb != IGNORE).sum())
        total += loss_torch(logits_torch(params, Xb, config), Yb).item() * n
        count += n
    return total / count


@torch.no_grad()
def sample_names(
    params: Params, config: GPTConfig, chars: str, block_size: int, count: int, g: torch.Generator
) -> list[str]:
    """``count`` names, all drawn together from '.' one character at a time, until '.'."""
    device = params["wte"].device
    X = torch.zeros(count, 1, dtype=torch.long, device=device)
    for _ in range(block_size - 1):
        probs = F.softmax(logits_torch(params, X, config)[:, -1].double(), dim=-1).cpu()
        nxt = torch.multinomial(probs, num_samples=1, generator=g).to(device)
        X = torch.cat([X, nxt], dim=1)
    names = []
    for row in X[:, 1:].tolist():
        end = row.index(0) if 0 in row else len(row)  # a name ends at its first '.'
        names.append("".join(chars[i] for i in row[:end]))
    return names
