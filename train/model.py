"""The seed's character-level MLP: parameters, the plain-torch forward, calibration, evaluation.

embedding -> concat -> linear -> batchnorm -> tanh -> linear -> cross entropy. The training
step through the generated ops lives in ``train.step``; this module holds what both backward
modes share and the inference path, which uses calibrated batchnorm statistics instead of the
batch's own (so it is not the generated batchnorm, which is training mode by contract).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

PARAM_NAMES = ("C", "W1", "b1", "W2", "b2", "bngain", "bnbias")
BN_EPS = 1e-5

Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class ModelShape:
    """The sizes that fix every parameter's shape."""

    vocab_size: int
    block_size: int
    n_embd: int
    n_hidden: int


@dataclass
class BatchNormStats:
    """Mean and unbiased variance of the hidden pre-activations over the whole training set."""

    mean: torch.Tensor
    var: torch.Tensor


def param_shapes(shape: ModelShape) -> dict[str, tuple[int, ...]]:
    """Each parameter's shape, in ``PARAM_NAMES`` order: what ``init_params`` draws."""
    V, T, E, H = shape.vocab_size, shape.block_size, shape.n_embd, shape.n_hidden
    shapes = {"C": (V, E), "W1": (T * E, H), "b1": (H,), "W2": (H, V), "b2": (V,)}
    return {**shapes, "bngain": (H,), "bnbias": (H,)}


def init_params(shape: ModelShape, g: torch.Generator, dtype: torch.dtype) -> Params:
    """The seed's initialisation, all drawn from ``g`` in the seed's order.

    Unlike the seed, bngain and bnbias come from ``g`` too, so one seed fixes the whole run.
    Values are drawn in float32 and then converted, so float32 and float64 runs start from the
    same numbers.
    """
    V, T, E, H = shape.vocab_size, shape.block_size, shape.n_embd, shape.n_hidden
    fan_in = E * T
    draws = {
        "C": torch.randn((V, E), generator=g),
        # (5/3)/sqrt(fan_in): Kaiming gain for tanh, keeps hprebn near unit scale
        "W1": torch.randn((fan_in, H), generator=g) * (5 / 3) / fan_in**0.5,
        "b1": torch.randn(H, generator=g) * 0.1,  # useless under batchnorm, kept as in the seed
        "W2": torch.randn((H, V), generator=g) * 0.1,
        "b2": torch.randn(V, generator=g) * 0.1,
        "bngain": torch.randn(H, generator=g) * 0.1 + 1.0,
        "bnbias": torch.randn(H, generator=g) * 0.1,
    }
    return {name: draws[name].to(dtype) for name in PARAM_NAMES}


def forward_torch(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> torch.Tensor:
    """The seed's training-mode forward in plain torch ops: the autograd reference."""
    p = params
    emb = p["C"][Xb]
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ p["W1"] + p["b1"]
    bnmean = hprebn.mean(0, keepdim=True)
    bnvar = hprebn.var(0, keepdim=True, unbiased=True)  # Bessel's correction, as the seed
    bnraw = (hprebn - bnmean) * (bnvar + BN_EPS) ** -0.5
    hpreact = p["bngain"] * bnraw + p["bnbias"]
    h = torch.tanh(hpreact)
    logits = h @ p["W2"] + p["b2"]
    return F.cross_entropy(logits, Yb)


def hidden_preact(params: Params, X: torch.Tensor) -> torch.Tensor:
    """embedding -> concat -> first linear layer, for any number of examples."""
    emb = params["C"][X]
    return emb.view(emb.shape[0], -1) @ params["W1"] + params["b1"]


@torch.no_grad()
def calibrate(params: Params, X_train: torch.Tensor) -> BatchNormStats:
    """Batchnorm statistics over the whole training set, replacing per-batch ones at inference."""
    hprebn = hidden_preact(params, X_train)
    return BatchNormStats(hprebn.mean(0), hprebn.var(0, unbiased=True))


@torch.no_grad()
def logits_eval(params: Params, stats: BatchNormStats, X: torch.Tensor) -> torch.Tensor:
    """Inference forward: batchnorm with the calibrated statistics, so one example works too."""
    hprebn = hidden_preact(params, X)
    bnraw = (hprebn - stats.mean) * (stats.var + BN_EPS) ** -0.5
    h = torch.tanh(params["bngain"] * bnraw + params["bnbias"])
    return h @ params["W2"] + params["b2"]


def split_loss(params: Params, stats: BatchNormStats, X: torch.Tensor, Y: torch.Tensor) -> float:
    """Mean cross entropy of a whole split under the calibrated model."""
    return F.cross_entropy(logits_eval(params, stats, X), Y).item()
