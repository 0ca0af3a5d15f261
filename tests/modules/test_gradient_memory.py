"""Each gradient a generated module hands autograd is a tensor of its own.

A backward may return ``grad_out`` itself (a residual sum: ``dx = grad_out``) or a view of it
(``dy = grad_out.T``); autograd gives a leaf's ``.grad`` the tensor it receives, so two leaves'
gradients, or a gradient and the caller's ``grad_out``, shared memory: an in-place clip of one
changed the other, and a second backward accumulated into the caller's tensor. The reference
is torch's own ``x + y.T + z``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tests.modules.emitted import imported

CASE = Path(__file__).resolve().parents[1] / "cases" / "residual_and_transpose.py"


def _leaves():
    return (
        torch.zeros(2, 3, requires_grad=True),
        torch.zeros(3, 2, requires_grad=True),
        torch.zeros(2, 3, requires_grad=True),
    )


def test_leaves_gradients_do_not_share_memory(tmp_path) -> None:
    module = imported(CASE, tmp_path)[0]
    mine, ref = _leaves(), _leaves()
    (module.Function.apply(*mine) * 4.0).sum().backward()
    ((ref[0] + ref[1].T + ref[2]) * 4.0).sum().backward()
    torch.nn.utils.clip_grad_norm_(mine, 1.0)
    torch.nn.utils.clip_grad_norm_(ref, 1.0)
    for got, want in zip(mine, ref, strict=True):
        torch.testing.assert_close(got.grad, want.grad)
    ptrs = {t.grad.untyped_storage().data_ptr() for t in mine}
    assert len(ptrs) == 3


def test_the_callers_grad_out_is_left_alone(tmp_path) -> None:
    module = imported(CASE, tmp_path)[0]
    mine = _leaves()
    g = torch.ones(2, 3)
    for _ in range(2):
        module.Function.apply(*mine).backward(g)
    torch.testing.assert_close(g, torch.ones(2, 3))
    for t in mine:
        torch.testing.assert_close(t.grad, torch.full_like(t, 2.0))
