"""``--check-every``: the seed's cmp table, generated gradients against autograd on one batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Params = dict[str, torch.Tensor]


@dataclass
class GradComparison:
    """One row of the table: a parameter's generated gradient vs autograd's."""

    name: str
    exact: bool
    approximate: bool
    maxdiff: float


def compare_gradients(
    steps: dict[str, Callable], params: Params, Xb: torch.Tensor, Yb: torch.Tensor
) -> list[GradComparison]:
    """Both backward modes (``steps``: ``(params, Xb, Yb) -> (loss, ..., grads)`` by backward)
    on the same parameters and batch, a row per parameter; nothing is updated."""
    generated = steps["generated"](params, Xb, Yb)[-1]
    reference = steps["autograd"](params, Xb, Yb)[-1]
    rows = []
    for name in params:
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
