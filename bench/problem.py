"""The benchmark's model sizes and the data one step runs on.

Vocabulary, context and embedding are the seed's (27, 3, 10); batch and hidden width grow, so
the same step goes from launch-bound (makemore) to bandwidth-bound (large).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from train.models.mlp_net import ModelShape, Params, init_params

VOCAB, BLOCK, N_EMBD = 27, 3, 10
SEED = 2147483647  # the seed's generator seed
LR = 0.1  # the seed's learning rate: the same number in the check and in the timed steps


@dataclass(frozen=True)
class Size:
    """One column of the table: batch size and hidden width."""

    name: str
    batch: int
    n_hidden: int


SIZES = {
    s.name: s
    for s in (
        Size("makemore", 32, 200),
        Size("medium", 512, 1024),
        Size("large", 4096, 4096),
    )
}


def parse_size(text: str) -> Size:
    """A size by name (``makemore``) or as ``BATCHxHIDDEN`` (``8x16``, for tests and probes)."""
    if text in SIZES:
        return SIZES[text]
    match = re.fullmatch(r"(\d+)x(\d+)", text)
    if not match or int(match[1]) < 2 or int(match[2]) < 1:  # Bessel's n-1 needs two examples
        raise ValueError(f"unknown size {text!r}: use one of {sorted(SIZES)} or BATCHxHIDDEN")
    return Size(text, int(match[1]), int(match[2]))


@dataclass
class Problem:
    """Initial parameters and a pool of batches; every variant starts from copies of these."""

    params: Params
    batches: list[tuple[torch.Tensor, torch.Tensor]]

    def copy_params(self, requires_grad: bool) -> Params:
        """Fresh leaves for one variant: the steps update their parameters in place."""
        return {k: v.detach().clone().requires_grad_(requires_grad) for k, v in self.params.items()}

    def to(self, dtype: torch.dtype) -> Problem:
        """The same numbers in another float dtype (the check runs in float64)."""
        params = {k: v.to(dtype) for k, v in self.params.items()}
        return Problem(params, self.batches)


def make_problem(size: Size, device: str, n_batches: int = 8) -> Problem:
    """Seed-style float32 initialisation and random batches, all from one seeded generator.

    The batches are random indices, not names: the step's cost does not depend on the data, and
    rotating a few batches keeps repeated steps from over-fitting one batch into extreme logits.
    """
    g = torch.Generator().manual_seed(SEED)
    shape = ModelShape(VOCAB, BLOCK, N_EMBD, size.n_hidden)
    params = {k: v.to(device) for k, v in init_params(shape, g, torch.float32).items()}
    batches = []
    for _ in range(n_batches):
        X = torch.randint(0, VOCAB, (size.batch, BLOCK), generator=g).to(device)
        Y = torch.randint(0, VOCAB, (size.batch,), generator=g).to(device)
        batches.append((X, Y))
    return Problem(params, batches)
