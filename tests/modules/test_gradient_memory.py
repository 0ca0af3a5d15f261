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


def test_an_output_may_be_changed_in_place_as_torchs() -> None:
    """layernorm's output is a reshape of an intermediate: a view the node made, which autograd
    refused to change in place (y.relu_(), an in-place dropout) where F.layer_norm's output
    takes it; likewise a create_graph gradient (gx.mul_(2))."""
    from generated import layernorm

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    w, b = (torch.randn(4, generator=g, dtype=torch.float64) for _ in range(2))
    mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    y = layernorm.Function.apply(mine, w, b)
    want = torch.nn.functional.layer_norm(ref, (4,), w, b)
    y.relu_()
    want.relu_()
    (gx,) = torch.autograd.grad(y.pow(2).sum(), mine, create_graph=True)
    (want_gx,) = torch.autograd.grad(want.pow(2).sum(), ref, create_graph=True)
    gx.mul_(2)
    want_gx.mul_(2)
    torch.testing.assert_close(gx, want_gx)


def test_non_reentrant_checkpointing_runs_the_op() -> None:
    """torch.utils.checkpoint(use_reentrant=False) unpacks each saved tensor once; the node's
    backward read ctx.saved_tensors twice (CheckpointError)."""
    from generated import tanh

    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    y = torch.utils.checkpoint.checkpoint(tanh.Function.apply, x, use_reentrant=False)
    (gx,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(gx, 1 - torch.tanh(x.detach()) ** 2)
