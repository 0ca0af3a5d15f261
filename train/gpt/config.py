"""The options that define a GPT run, stored in every checkpoint so ``--resume`` repeats them."""

from __future__ import annotations

from dataclasses import dataclass

from train.config import Schedule

GELUS = ("tanh", "erf")  # makemore's NewGELU (tanh approximation), or F.gelu's exact erf form


@dataclass(frozen=True)
class GPTConfig(Schedule, steps=5000, seed=3407, lr=5e-4, batch_size=32):
    """makemore's defaults: 4 layers, 4 heads, 64 wide; AdamW 5e-4, betas (0.9, 0.99), wd 0.01,
    seed 3407 (makemore's).

    makemore keeps its learning rate constant, so ``lr_at`` does too (the MLP and the
    classifier divide theirs by 10 at the halfway step).
    """

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 64
    weight_decay: float = 0.01
    gelu: str = "tanh"

    def lr_at(self, step: int) -> float:
        return self.lr

    @classmethod
    def choices(cls) -> dict[str, tuple[str, ...]]:
        return {**super().choices(), "gelu": GELUS}
