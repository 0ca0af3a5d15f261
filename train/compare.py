"""``--check-every``: the seed's cmp table, generated gradients against autograd on one batch."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from train.model import PARAM_NAMES, Params
from train.step import autograd_step, generated_step


@dataclass
class GradComparison:
    """One row of the table: a parameter's generated gradient vs autograd's."""

    name: str
    exact: bool
    approximate: bool
    maxdiff: float


def compare_gradients(params: Params, Xb: torch.Tensor, Yb: torch.Tensor) -> list[GradComparison]:
    """Both backward modes on the same parameters and batch; nothing is updated."""
    _, generated = generated_step(params, Xb, Yb)
    _, reference = autograd_step(params, Xb, Yb)
    rows = []
    for name in PARAM_NAMES:
        mine, theirs = generated[name], reference[name]
        rows.append(
            GradComparison(
                name,
                exact=bool(torch.equal(mine, theirs)),
                approximate=torch.allclose(mine, theirs),
                maxdiff=(mine - theirs).abs().max().item(),
            )
        )
    return rows


def format_table(step: int, rows: list[GradComparison]) -> str:
    """The seed's ``cmp`` lines under a header naming the step."""
    lines = [f"gradient check at step {step}: generated backward vs autograd"]
    for r in rows:
        lines.append(
            f"{r.name:15s} | exact: {str(r.exact):5s} | approximate: {str(r.approximate):5s} "
            f"| maxdiff: {r.maxdiff}"
        )
    return "\n".join(lines)
