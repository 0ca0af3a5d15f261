"""Ties between the arguments of nested maximums and minimums: each torch.maximum splits its
gradient 1/2 at a tie, so ``maximum(maximum(x, y), z)`` at x = y = z gives 1/4, 1/4, 1/2. SymPy
flattens the nesting into ``Max(x, y, z)`` unless it is kept apart (language.ranges.nested);
flattened, each argument got 1/2. References: the same formula in torch's ops, under autograd
(first and second derivatives) and forward-mode AD (tangents)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.func import jacfwd

from tests.modules.emitted import imported

CASE = Path(__file__).resolve().parents[1] / "cases" / "nested_maximums.py"
D = torch.float64
POINTS = [(0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (1.0, 1.0, 0.0), (0.0, 1.0, 1.0), (-1.0, -1.0, -1.0)]


def _reference(x, y, z):
    zero = torch.zeros_like(x)
    m = torch.maximum(x, y)
    return (
        torch.maximum(m, z) + torch.minimum(x, torch.minimum(y, zero)) + torch.maximum(m, zero) ** 2
    )


def _grads(total: torch.Tensor, leaves: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """d total / d leaves, zeros for a leaf it does not read (a step's derivative is 0)."""
    grads = torch.autograd.grad(total, leaves, allow_unused=True, materialize_grads=True)
    return tuple(grads)


@pytest.mark.parametrize("point", POINTS)
def test_nested_maximums_split_a_tie_as_torch(point, tmp_path) -> None:
    module = imported(CASE, tmp_path)[0]
    mine = [torch.tensor([v, 0.3], dtype=D, requires_grad=True) for v in point]
    ref = [t.detach().clone().requires_grad_() for t in mine]
    got = torch.autograd.grad(module.Function.apply(*mine).sum(), mine, create_graph=True)
    want = torch.autograd.grad(_reference(*ref).sum(), ref, create_graph=True)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    second = _grads(sum(g.sum() for g in got), mine)
    want_second = _grads(sum(w.sum() for w in want), ref)
    for g, w in zip(second, want_second, strict=True):
        torch.testing.assert_close(g, w)
    for k in range(3):
        args = [t.detach() for t in mine]

        def along(v, k=k, args=args):
            return module.Function.apply(*args[:k], v, *args[k + 1 :])

        def ref_along(v, k=k, args=args):
            return _reference(*args[:k], v, *args[k + 1 :])

        torch.testing.assert_close(jacfwd(along)(args[k]), jacfwd(ref_along)(args[k]))
