"""An index read as a number (tests/cases/index_as_a_number.py: ALiBi's slope * (i - j))
against ALiBi written by hand in torch: an oracle that reads neither the op's definitions nor
the engine's parse of them. Float64 at 1e-12 (forward and every gradient, autograd on the
hand-written version); float32 at float32's rounding, the penalty made in the op's dtype."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from tests.modules.emitted import imported

CASE = Path(__file__).resolve().parents[1] / "cases" / "index_as_a_number.py"


def _alibi(q, k, v, slope):
    T, D = q.shape
    i = torch.arange(T, dtype=q.dtype)
    s = q @ k.T / math.sqrt(D) - slope * (i[:, None] - i[None, :])
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(s.masked_fill(future, float("-inf")), dim=-1) @ v


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize(("T", "D"), [(1, 3), (7, 4), (33, 8)])
def test_alibi_is_the_hand_written_one(T, D, dtype, tol, tmp_path) -> None:
    module, _ = imported(CASE, tmp_path)
    g = torch.Generator().manual_seed(T * 100 + D)
    mine = [torch.randn(T, D, generator=g, dtype=dtype, requires_grad=True) for _ in range(3)]
    theirs = [t.detach().clone().requires_grad_(True) for t in mine]
    out, want = module.Function.apply(*mine, 0.75), _alibi(*theirs, 0.75)
    assert out.dtype == dtype
    torch.testing.assert_close(out, want, rtol=tol, atol=tol)
    grad = torch.randn(T, D, generator=g, dtype=dtype)
    out.backward(grad)
    want.backward(grad)
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=tol, atol=tol)
