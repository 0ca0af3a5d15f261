"""The options that define a classifier run, stored in every checkpoint for ``--resume``."""

from __future__ import annotations

from dataclasses import dataclass

from train.config import Schedule

OPTIMIZERS = ("sgd", "rmsprop", "adam", "adamw")
MOMENTUM_OPTIMIZERS = ("sgd", "rmsprop")  # Adam and AdamW have betas instead
# --lr when not given. Plain or momentum SGD takes the raw gradient; RMSprop and Adam divide by a
# running RMS of it, so their steps are ~lr per weight and want a much smaller lr. RMSprop with
# momentum 0.9 steps ~lr/(1 - 0.9) per weight: at 1e-3 its float32 runs wander apart on the flat
# minimum once the training loss is ~0 (gradients of 1e-6 divided by their own RMS are steps of
# full size in directions set by rounding); 3e-4 reached 97.8% test with both backwards.
DEFAULT_LR = {"sgd": 0.05, "rmsprop": 0.0003, "adam": 0.001, "adamw": 0.001}
DEFAULT_MOMENTUM = 0.9
DEFAULT_WEIGHT_DECAY = {"sgd": 0.0, "rmsprop": 0.0, "adam": 0.0, "adamw": 0.01}


@dataclass(frozen=True)
class ClassifierConfig(Schedule, steps=2000, seed=2147483647, lr=0.001, batch_size=64):
    """One run: the network, the optimizer and its schedule, the numbers' type, the backward."""

    hidden: tuple[int, ...] = (512, 512)
    optimizer: str = "adam"
    momentum: float = 0.0
    weight_decay: float = 0.0
    clip_grad_norm: float = 0.0  # 0: no clipping

    @classmethod
    def choices(cls) -> dict[str, tuple[str, ...]]:
        return {**super().choices(), "optimizer": OPTIMIZERS}
