"""The seed's character-level MLP: parameters, the plain-torch forward, calibration, evaluation,
sampling, and the memory a step needs.

embedding -> concat -> linear -> batchnorm -> tanh -> linear -> cross entropy. The training
step through the generated ops lives in the spec (``train.models.mlp``); this module holds what
both backward modes share and the inference path, which uses calibrated batchnorm statistics
instead of the batch's own (so it is not the generated batchnorm, which is training mode by
contract).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from train.data import load_contexts
from train.preflight import UsageError, check_fits

PARAM_NAMES = ("C", "W1", "b1", "W2", "b2", "bngain", "bnbias")
BN_EPS = 1e-5
# An undertrained model may rarely pick '.', so cap a name's length rather than loop forever.
MAX_NAME_LENGTH = 100

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


def check_examples_fit(data_path: Path, block_size: int) -> None:
    """Before the examples are built: each character of the file becomes about one example
    of ``block_size`` context ids, built as Python ints (~40 bytes each) then int64."""
    try:
        size = data_path.stat().st_size
    except OSError:
        return  # reading it will say what is wrong
    what, purpose = f"--block-size {block_size}", f"the examples of {data_path}"
    check_fits(size * block_size * 48, what, "use a smaller --block-size", purpose)


def step_bytes(shape: ModelShape, batch_size: int, dtype: str, n_train: int) -> int:
    """Estimated peak bytes of one step, or of calibration over the training set if larger.

    Per example a step holds about 10 activations or gradients of the hidden width, 10 of
    the vocabulary and 4 of the concatenated embedding (measured on CPU, generated backward,
    n_hidden 200: 6.9 KB an example in float32 against this formula's 9.5 KB), plus the
    int64 batch. Calibration holds the embedding and the hidden layer of every example.
    """
    V, T, E, H = shape.vocab_size, shape.block_size, shape.n_embd, shape.n_hidden
    item = 8 if dtype == "float64" else 4
    per_example = (10 * H + 10 * V + 4 * T * E) * item + 8 * (T + 2)
    calibration = 2 * n_train * (T * E + H) * item
    return max(batch_size * per_example, calibration)


class SamplingError(UsageError):
    """The model cannot be sampled: its probabilities are not finite (a diverged run), or
    its batchnorm statistics cannot be computed."""


def sample_names(
    params: Params,
    stats: BatchNormStats,
    chars: str,
    block_size: int,
    count: int,
    g: torch.Generator,
) -> list[str]:
    """``count`` names; each starts from an all-'.' context and ends when '.' is drawn."""
    names = []
    for _ in range(count):
        out: list[int] = []
        context = [0] * block_size
        while len(out) < MAX_NAME_LENGTH:
            logits = logits_eval(params, stats, torch.tensor([context]))
            probs = F.softmax(logits, dim=1)
            if not torch.isfinite(probs).all():
                raise SamplingError("the model's probabilities are not finite (diverged run?)")
            ix = torch.multinomial(probs, num_samples=1, generator=g).item()
            if ix == 0:
                break
            out.append(ix)
            context = context[1:] + [ix]
        names.append("".join(chars[i] for i in out))
    return names


def checkpoint_stats(saved: dict, data_path: str | None, block_size: int) -> BatchNormStats:
    """A checkpoint's batchnorm statistics; a periodic one saved without them (see
    ``train.models.mlp.calibration_due``) is calibrated here from the run's data (``data_path``
    or the path it recorded)."""
    if saved["bn_stats"] is not None:
        return BatchNormStats(**saved["bn_stats"])
    path = Path(data_path or saved["data"]["path"])
    data = load_contexts(path, block_size) if path.is_file() else None
    if data is None or data.sha256 != saved["data"]["sha256"]:
        raise SamplingError(
            f"the checkpoint was saved mid-run without batchnorm statistics and the run's "
            f"data ({path}) is not there to compute them: give --data PATH"
        )
    return calibrate(saved["params"], data.X_train)
