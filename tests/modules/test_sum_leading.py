"""Sums over leading axes (``_sum_leading`` in a generated module) against torch's own sums.

The printer writes a sum or mean over a tensor's first k axes as the module's helper, which
sums a large float tensor 16 rows at a time and then the blocks (derive/ir/printer.py,
``leading_sum``). The reference is ``x.sum(dims)`` and ``x.mean(dims)``; the blocked path is
shown taken (three aten sums where a row count leaves a remainder) or not (one).
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import generated.linear as linear


class _Sums(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func.overloadpacket.__name__ in ("sum", "mean")
        return func(*args, **(kwargs or {}))


def _sums(x: torch.Tensor, k: int, mean: bool) -> tuple[torch.Tensor, int]:
    with _Sums() as mode:
        out = linear._sum_leading(x, k, mean=mean)
    return out, mode.count


@pytest.mark.parametrize(
    "shape, k, blocked",
    [
        ((1030, 1024), 1, 3),  # 1024 rows in blocks of 16, then the last 6 added
        ((4096, 256), 1, 2),
        ((4, 300, 1024), 2, 3),  # a (1200, 1024) view: 1200 = 75 blocks of 16
        ((512, 64), 1, 1),  # small: torch's one sum
        ((65536, 16), 1, 1),  # rows of 16: blocks of them gain nothing
    ],
)
@pytest.mark.parametrize("mean", [False, True])
def test_sum_leading_is_torch_sum(shape, k, blocked, mean) -> None:
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=torch.float64)
    out, count = _sums(x, k, mean)
    dims = tuple(range(k))
    want = x.mean(dims) if mean else x.sum(dims)
    assert out.shape == want.shape and out.dtype == want.dtype
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-12)
    if blocked == 3 and shape[0] * (shape[1] if k == 2 else 1) % 16 == 0:
        blocked = 2  # no remainder
    assert count == blocked


def test_other_layouts_and_dtypes_take_torch_sum() -> None:
    x = torch.randn(1024, 1024, dtype=torch.float64)
    for y in (x.T, x.to(torch.bfloat16), x[:, ::2].repeat(1, 2)[:, :1023]):
        out, count = _sums(y, 1, False)
        assert torch.allclose(out.double(), y.sum(0).double(), rtol=1e-12, atol=1e-12)
        assert count == 1 or y.is_contiguous()


def test_a_large_linear_backward_matches_autograd() -> None:
    # grad_out of (1030, 1024): db is a blocked sum with a remainder of 6 rows
    torch.manual_seed(1)
    x = torch.randn(1030, 256, dtype=torch.float64, requires_grad=True)
    W = torch.randn(256, 1024, dtype=torch.float64, requires_grad=True)
    b = torch.randn(1024, dtype=torch.float64, requires_grad=True)
    grad_out = torch.randn(1030, 1024, dtype=torch.float64)
    ref = torch.autograd.grad(x @ W + b, (x, W, b), grad_out)
    _, saved = linear.forward(x.detach(), W.detach(), b.detach())
    with _Sums() as mode:
        mine = linear.backward(grad_out, saved)
    assert mode.count == 3
    for m, r in zip(mine, ref, strict=True):
        assert (m - r).abs().max() <= 1e-10
