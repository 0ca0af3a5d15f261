"""The CNN: per entry of ``--channels`` a block conv -> ReLU -> 2x2 max pool, then a linear layer
to 10 logits and mean cross-entropy.

A conv has a square ``kernel`` (odd), stride 1 and zero padding ``kernel // 2``, so it keeps the
image's size: H_out = (H + 2*(k // 2) - k) // 1 + 1 = H for odd k. The pool (kernel 2, stride 2)
halves it, rounding down: H -> H // 2. An 8x8 digit through two blocks is 2x2, an MNIST image
7x7; the linear layer reads the last block's C x H x W features flattened in that order.

Parameters are ``W1, b1, ..., WL, bL`` as the classifier's, so its monitor reads them as they are:
conv weights [C_out, C_in, k, k] (F.conv2d's layout) and biases [C_out], the last ``W`` in the
seeds' layout [features, 10]. This module holds what both backward modes share: the shapes, the
initialisation, the plain-torch forward that autograd differentiates (F.conv2d, F.relu,
F.max_pool2d, F.cross_entropy), the evaluation of a whole split, and the memory a step needs.
The optimizers and clipping are the classifier's (``classifier_net``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from train.models.classifier_net import Evaluation, Params, n_layers

POOL = 2  # every block's max pool: a 2x2 window every 2 pixels
IN_CHANNELS = 1  # grey images
EVAL_CHUNK = 1000  # images per forward when evaluating a split: MNIST's 55,000 at once is GBs


def block_shapes(
    image_shape: tuple[int, int], channels: tuple[int, ...]
) -> list[tuple[int, int, int]]:
    """(C, H, W) after each block: the conv keeps H x W, the pool halves it, rounding down."""
    (h, w), shapes = image_shape, []
    for c in channels:
        h, w = h // POOL, w // POOL
        shapes.append((c, h, w))
    return shapes


def n_features(image_shape: tuple[int, int], channels: tuple[int, ...]) -> int:
    """What the linear layer reads: the last block's C * H * W."""
    return math.prod(block_shapes(image_shape, channels)[-1])


def param_shapes(
    channels: tuple[int, ...], kernel: int, features: int, n_classes: int
) -> dict[str, tuple[int, ...]]:
    """Every parameter's shape, in the optimizer's order: the convs', then the linear layer's."""
    shapes: dict[str, tuple[int, ...]] = {}
    c_in = IN_CHANNELS
    for i, c in enumerate(channels, start=1):
        shapes[f"W{i}"], shapes[f"b{i}"] = (c, c_in, kernel, kernel), (c,)
        c_in = c
    last = len(channels) + 1
    shapes[f"W{last}"], shapes[f"b{last}"] = (features, n_classes), (n_classes,)
    return shapes


def init_params(
    shapes: dict[str, tuple[int, ...]], g: torch.Generator, dtype: torch.dtype
) -> Params:
    """Kaiming-normal weights, zero biases, drawn from ``g`` in ``shapes``' order.

    fan_in is what one output sums over: C_in * k * k for a conv, the features for the linear
    layer. A conv feeding a ReLU gets std sqrt(2 / fan_in) (the max pool after it keeps the
    scale roughly, taking the largest of 4 values); the linear layer, feeding the softmax, std
    sqrt(1 / fan_in). Drawn in float32, then converted, so float32 and float64 runs start from
    the same numbers.
    """
    params: Params = {}
    weights = [name for name in shapes if name.startswith("W")]
    for name, shape in shapes.items():
        if name.startswith("b"):
            params[name] = torch.zeros(shape, dtype=dtype)
            continue
        fan_in = math.prod(shape[1:]) if len(shape) == 4 else shape[0]
        gain = 1.0 if name == weights[-1] else 2.0
        params[name] = (torch.randn(shape, generator=g) * (gain / fan_in) ** 0.5).to(dtype)
    return params


def kernel_of(params: Params) -> int:
    return params["W1"].shape[-1]


def hidden_and_logits(params: Params, X: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Plain-torch forward: every block's ReLU output (before its pool) and the logits."""
    L, h, hidden = n_layers(params), X, []
    padding = kernel_of(params) // 2
    for i in range(1, L):
        h = F.relu(F.conv2d(h, params[f"W{i}"], params[f"b{i}"], padding=padding))
        hidden.append(h)
        h = F.max_pool2d(h, POOL)
    return hidden, h.flatten(1) @ params[f"W{L}"] + params[f"b{L}"]


def forward_torch(
    params: Params, X: torch.Tensor, Y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy (F.cross_entropy) and the logits: what autograd differentiates."""
    _, logits = hidden_and_logits(params, X)
    return F.cross_entropy(logits, Y), logits


@torch.no_grad()
def evaluate(params: Params, X: torch.Tensor, Y: torch.Tensor) -> Evaluation:
    """Loss, accuracy and dead channels of one split, ``EVAL_CHUNK`` images at a time.

    A channel is dead when its ReLU outputs 0 at every pixel of every image of the split (the
    classifier's dead unit, a conv's unit being its channel).
    """
    X = X.to(params["W1"].dtype)
    loss, correct, fired = 0.0, 0, [False] * (n_layers(params) - 1)
    for start in range(0, len(Y), EVAL_CHUNK):
        hidden, logits = hidden_and_logits(params, X[start : start + EVAL_CHUNK])
        y = Y[start : start + EVAL_CHUNK]
        loss += F.cross_entropy(logits, y, reduction="sum").item()
        correct += int((logits.argmax(1) == y).sum())
        fired = [f | (h.amax((0, 2, 3)) > 0) for f, h in zip(fired, hidden)]
    dead = [(~f).to(torch.float64).mean().item() for f in fired]
    return Evaluation(loss / len(Y), correct / len(Y), dead)


def step_bytes(
    shapes: dict[str, tuple[int, ...]],
    image_shape: tuple[int, int],
    channels: tuple[int, ...],
    batch_size: int,
    dtype: str,
) -> int:
    """Estimated peak bytes, in items of the dtype: parameters with their gradients, two
    optimizer states and the float32 draw of the initialisation (~5 per parameter); per image
    of a batch 4 copies (conv, ReLU, their gradients) of every block's unpooled output, or 2 of
    them for ``EVAL_CHUNK`` images when evaluating."""
    n_params = sum(math.prod(s) for s in shapes.values())
    h, w = image_shape
    per_image = h * w * IN_CHANNELS
    for c, (_, ph, pw) in zip(channels, block_shapes(image_shape, channels)):
        per_image += c * h * w
        h, w = ph, pw
    item = 8 if dtype == "float64" else 4
    return (5 * n_params + max(4 * batch_size, 2 * EVAL_CHUNK) * per_image) * item
