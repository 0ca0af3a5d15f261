"""causal_self_attention beyond the sweep: the edge cases of issue 13 and the shape of its code.

The sweep (tests/modules/test_numeric.py) compares it with F.scaled_dot_product_attention; here
it is also compared with attention written out by hand (a tril mask and a softmax), at T = 1, on the
first row (one unmasked position), with scores of +-1e4, and its emitted backward is read: the
softmax's adjoint collapsed to one element-wise line, no T x T one-hot, no exp recomputed.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from generated import causal_self_attention as attention
from tests.op_table import attention_reference

DT = torch.float64


def _by_hand(x, Wqkv, bqkv, Wo, bo, n_head):
    """The same attention with the mask and softmax written out (no SDPA)."""
    B, T, C = x.shape
    D = C // n_head
    q, k, v = (x @ Wqkv + bqkv).split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, D).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / D**0.5
    att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = torch.softmax(att, dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, C) @ Wo + bo


def _inputs(B, T, C, scale=1.0, seed=0, dtype=DT):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(B, T, C, generator=gen, dtype=dtype) * scale,
        torch.randn(C, 3 * C, generator=gen, dtype=dtype),
        torch.randn(3 * C, generator=gen, dtype=dtype),
        torch.randn(C, C, generator=gen, dtype=dtype),
        torch.randn(C, generator=gen, dtype=dtype),
    ]


def _grads(fn, inputs, grad_out, n_head):
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = fn(*leaves, n_head=n_head)
    return out.detach(), torch.autograd.grad(out, leaves, grad_out)


@pytest.mark.parametrize(("B", "T", "C", "n_head"), [(2, 5, 8, 4), (1, 1, 6, 3), (3, 4, 6, 1)])
def test_matches_attention_written_by_hand(B: int, T: int, C: int, n_head: int) -> None:
    inputs = _inputs(B, T, C)
    out, saved = attention.forward(*inputs, n_head=n_head)
    grad_out = torch.randn_like(out)
    mine = attention.backward(grad_out, saved)
    want_out, want = _grads(_by_hand, inputs, grad_out, n_head)
    assert (out - want_out).abs().max() <= 1e-10
    for a, b in zip(mine, want, strict=True):
        assert (a - b).abs().max() <= 1e-10 * max(1.0, float(b.abs().max()))


def test_one_position_and_the_first_row_attend_only_to_themselves() -> None:
    # T = 1: every softmax has one entry; row 0 of any T is masked except its diagonal
    for T in (1, 4):
        inputs = _inputs(2, T, 4)
        out, saved = attention.forward(*inputs, n_head=2)
        probs = saved[attention.SAVED.index("probs")]
        assert torch.equal(probs[:, :, 0, 0], torch.ones_like(probs[:, :, 0, 0]))
        assert torch.equal(probs.tril(), probs)  # nothing above the diagonal: no future key
        grads = attention.backward(torch.ones_like(out), saved)
        assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_scores_of_plus_minus_1e4_stay_finite_and_exact(dtype: torch.dtype) -> None:
    # q = x, k = x, v = x per head (identity blocks), x of +-70: scores about +-1e4
    B, T, C, n_head = 2, 5, 4, 2
    x = torch.tensor([70.0, -70.0]).repeat(B, T, C // 2).to(dtype)
    x = x * torch.randn(B, T, 1, generator=torch.Generator().manual_seed(1), dtype=dtype).sign()
    eye = torch.eye(C, dtype=dtype)
    inputs = [x, torch.cat([eye, eye, eye], 1), torch.zeros(3 * C, dtype=dtype), eye, eye[0]]
    out, saved = attention.forward(*inputs, n_head=n_head)
    scores = saved[attention.SAVED.index("q")] @ saved[attention.SAVED.index("k")].transpose(2, 3)
    assert scores.abs().max() >= 9e3
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(2), dtype=dtype)
    mine = attention.backward(grad_out, saved)
    want_out, want = _grads(attention_reference, inputs, grad_out, n_head)
    assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in mine)
    tol = 1e-9 if dtype == torch.float64 else 1e-2
    assert torch.allclose(out, want_out, rtol=tol, atol=tol)
    for a, b in zip(mine, want, strict=True):
        assert torch.allclose(a, b, rtol=tol, atol=tol * max(1.0, float(b.abs().max())))


def test_a_width_not_divisible_by_the_heads_is_one_line() -> None:
    inputs = _inputs(1, 2, 10)
    with pytest.raises(ValueError, match=r"^causal_self_attention: C = 10 is not divisible by "):
        attention.forward(*inputs, n_head=3)
    with pytest.raises(ValueError, match=r"^causal_self_attention: n_head must be a positive int"):
        attention.forward(*inputs, n_head=2.0)


def test_backward_is_the_collapsed_softmax_and_contractions() -> None:
    code = inspect.getsource(attention.backward)
    # dS = P * (dP - rowsum(dP * P)): one element-wise line reads probs, then matmuls/einsums
    # (its kernels written into the difference's buffer: _into(torch.mul, _into(torch.sub, ..)))
    ds_lines = [
        ln for ln in code.split(" = ") if "probs)" in ln and "_into(torch.sub, sum_dy_v," in ln
    ]
    assert len(ds_lines) == 1, code
    assert "torch.exp" not in code and "torch.arange" not in code  # no recompute, no one-hot
    assert "==" not in code and "amax" not in code
    # every contraction a matmul (issue 27): dx and dWqkv one each, over dq, dk, dv stacked,
    # and dbqkv summed from the same stack (it stacked three sums of its own before)
    assert code.count(" @ ") == 8 and "torch.einsum" not in code, code
    assert code.count("torch.stack") == 1


# -- sequence_cross_entropy: positions whose target is -1 are not counted -----------------------
@pytest.mark.parametrize("scale", [1e4, -1e4, 3.0])
def test_sequence_cross_entropy_ignores_minus_one_and_stays_finite(scale: float) -> None:
    from generated import sequence_cross_entropy as sce
    from tests.op_table import sequence_ce_reference

    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 5, 4, generator=gen, dtype=DT) * scale
    targets = torch.tensor([[1, -1, 3, -1, 0], [-1, 2, -1, -1, 3]])
    loss, saved = sce.forward(logits, targets)
    dlogits, dtargets = sce.backward(torch.tensor(0.7, dtype=DT), saved)
    leaf = logits.clone().requires_grad_()
    ref = sequence_ce_reference(leaf, targets)
    (want,) = torch.autograd.grad(ref * 0.7, leaf)
    assert dtargets is None and torch.isfinite(loss) and torch.isfinite(dlogits).all()
    assert abs(float(loss) - float(ref.detach())) <= 1e-10 * max(1.0, abs(float(ref.detach())))
    assert (dlogits - want).abs().max() <= 1e-10
    assert torch.equal(dlogits[targets < 0], torch.zeros_like(dlogits[targets < 0]))


def test_sequence_cross_entropy_counts_one_position_alone() -> None:
    from generated import sequence_cross_entropy as sce
    from tests.op_table import sequence_ce_reference

    logits = torch.randn(3, 4, 6, dtype=DT)
    targets = torch.full((3, 4), -1)
    targets[2, 1] = 5
    loss, saved = sce.forward(logits, targets)
    dlogits, _ = sce.backward(torch.tensor(1.0, dtype=DT), saved)
    leaf = logits.clone().requires_grad_()
    sequence_ce_reference(leaf, targets).backward()
    assert abs(float(loss) + float(torch.log_softmax(logits[2, 1], 0)[5])) <= 1e-12
    assert (dlogits - leaf.grad).abs().max() <= 1e-12
    assert int((dlogits != 0).any(-1).sum()) == 1  # one row of the gradient, the counted one


def test_sequence_cross_entropy_refuses_a_target_past_the_vocabulary() -> None:
    from generated import sequence_cross_entropy as sce

    with pytest.raises(
        IndexError, match=r"^sequence_cross_entropy: targets has values in \[4, 4\].*-1 is ignored"
    ):
        sce.forward(torch.randn(1, 2, 4, dtype=DT), torch.tensor([[-1, 4]]))


def test_sequence_cross_entropy_ignores_minus_one_alone_as_its_ignore_index() -> None:
    # found by probing: written ``targets >= 0``, every negative target was ignored where
    # F.cross_entropy(..., ignore_index=-1), which the op's doc names, refuses -5 and -100
    from generated import sequence_cross_entropy as sce

    logits, targets = torch.randn(2, 3, 4, dtype=DT), torch.tensor([[-1, 2, 0], [3, -1, 1]])
    loss, _ = sce.forward(logits, targets)
    want = torch.nn.functional.cross_entropy(logits.view(-1, 4), targets.view(-1), ignore_index=-1)
    assert torch.allclose(loss, want, rtol=1e-12, atol=0)
    for bad in (-5, -100):
        targets[0, 1] = bad
        with pytest.raises(IndexError):
            torch.nn.functional.cross_entropy(logits.view(-1, 4), targets.view(-1), ignore_index=-1)
        with pytest.raises(
            IndexError, match=rf"^sequence_cross_entropy: targets has values in \[{bad}, "
        ):
            sce.forward(logits, targets)
