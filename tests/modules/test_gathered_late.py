"""A sum read at one position is taken at every position and gathered after.

The adjoint of a table read at an offset, ``tab[t - s + T - 1]``, is the scores' adjoint
summed along its diagonals. The derivation solves the offset's delta for one index, so the
adjoint reads everything at ``clamp(r + t - T + 1, 0, T - 1)``; gathered there before the
sums under it, ``sum_d grad_out[b, clamp(..), d] v[b, t, d]`` was a (B, T, 2T - 1, D)
temporary (:func:`derive.lower.reductions._gathered_late`). So were relative keys' scores,
``sum_d q[b, t, d] R[t - s + T - 1, d]``, now ``q @ R^T`` read at the offsets, and their
table's adjoint, whose reads at the solved position and at its clamp are one under the
gates that hold it (:func:`derive.lower.select.held_under_gates`). The reference is autograd
through plain torch ops written from the math (float64); the width is the most entries of
any tensor the backward makes, against autograd's backward, through a dispatch mode.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from bench.aten_calls import Counting
from bench.widest import Widest
from tests.modules.emitted import imported

DT = torch.float64
ROOT = Path(__file__).resolve().parents[2]


def _op_file(
    folder: Path, name: str, inputs: list[str], definitions: list[str], ranges: dict | None = None
) -> Path:
    path = folder / f"{name}.py"
    path.write_text(
        "from derive import Op\n\n"
        f"OP = Op(name={name!r}, inputs={inputs!r}, definitions={definitions!r},"
        f" ranges={ranges or {}!r})\n"
    )
    return path


def _offsets(t: int) -> torch.Tensor:
    at = torch.arange(t)
    return at[:, None] - at[None, :] + t - 1


def _softmax(s: torch.Tensor) -> torch.Tensor:
    e = torch.exp(s - s.amax(-1, keepdim=True).detach())
    return e / e.sum(-1, keepdim=True)


def _grid_attention(q, k, v, tab):
    b, h, i, j, d = q.shape
    qf, kf, vf = (x.reshape(b, h, i * j, d) for x in (q, k, v))
    rows, cols = (x.reshape(-1) for x in torch.meshgrid(*map(torch.arange, (i, j)), indexing="ij"))
    bias = tab[:, rows[:, None] - rows + i - 1, cols[:, None] - cols + j - 1]
    s = qf @ kf.transpose(-1, -2) / math.sqrt(d) + bias
    return (_softmax(s) @ vf).reshape(b, h, i, j, d)


SOFTMAX = [
    "mx[b, t] = Max(sc[b, t, s], s)",
    "e[b, t, s] = exp(sc[b, t, s] - mx[b, t])",
    "out[b, t, d] = Sum(e[b, t, s] * v[b, s, d], s) / Sum(e[b, t, s], s)",
]

# (name, op file or (inputs, definitions), plain torch reference, input shapes)
CASES = [
    (
        "relative_position_attention",
        ROOT / "tests" / "cases" / "relative_position_attention.py",
        lambda q, k, v, tab: _softmax(
            q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + tab[:, _offsets(q.shape[2])]
        )
        @ v,
        [(2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8), (3, 11)],
    ),
    (
        "relative_position_keys",
        ROOT / "tests" / "cases" / "relative_position_keys.py",
        lambda q, k, v, R: _softmax(
            q @ k.transpose(-1, -2) + torch.einsum("btd,tsd->bts", q, R[_offsets(q.shape[1])])
        )
        @ v,
        [(4, 6, 8), (4, 6, 8), (4, 6, 8), (11, 8)],
    ),
    (
        "relative_position_grid",
        ROOT / "tests" / "cases" / "relative_position_grid.py",
        lambda q, k, v, tab: _grid_attention(q, k, v, tab),
        [(2, 2, 3, 4, 8), (2, 2, 3, 4, 8), (2, 2, 3, 4, 8), (2, 5, 7)],
    ),
    (
        "scores_with_a_table",
        (
            ["s0[B, T, T]", "v[B, T, D]", "tab[TT]"],
            ["sc[b, t, s] = s0[b, t, s] + tab[t - s + T - 1]", *SOFTMAX],
        ),
        lambda s0, v, tab: _softmax(s0 + tab[_offsets(s0.shape[1])]) @ v,
        [(3, 7, 7), (3, 7, 9), (13,)],
    ),
]


@pytest.mark.parametrize(("name", "op", "ref", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_a_diagonal_sum_is_gathered_after_its_sums(name, op, ref, shapes, tmp_path: Path) -> None:
    path = op if isinstance(op, Path) else _op_file(tmp_path, name, *op)
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(3)
    args = [torch.randn(s, generator=gen, dtype=DT) for s in shapes]
    leaves = [a.clone().requires_grad_() for a in args]
    want = ref(*leaves)
    grad_out = torch.randn(want.shape, generator=gen, dtype=DT)
    with Widest() as autograd:
        want_grads = torch.autograd.grad(want, leaves, grad_out)
    out, saved = module.forward(*args)
    with Widest() as generated:
        grads = module.backward(grad_out, saved)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-13)
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)
    # within the 2T - 1 offsets' width of autograd's: read along the diagonals, a (T, T, D)
    # contraction is (T, 2T - 1, D); gathered inside the sums it was B or D times that
    assert generated.entries <= 2 * autograd.entries, (generated.entries, autograd.entries)


def test_a_table_of_offsets_is_a_matmul(tmp_path: Path) -> None:
    """``sum_s tab[t - s + T - 1] v[b, s, d]`` is the table laid out over (t, s) and one
    matmul, as autograd's ``tab[idx] @ v``, and the table's gradient ``v @ grad_out^T``
    summed along its diagonals; as one-channel convolutions with 2T - 1 taps they ran 38x
    autograd's time (:func:`derive.lower.reductions._toeplitz`, ``_at_every_lag``). A
    causal convolution's taps, ``w[c, t - s + K - 1]``, stay a convolution
    (:func:`derive.lower.reductions._offset`: not centred on the indices)."""
    path = _op_file(
        tmp_path,
        "toeplitz_product",
        ["v[B, T, D]", "tab[TT]"],
        ["out[b, t, d] = Sum(tab[t - s + T - 1] * v[b, s, d], s)"],
        {"t": "T"},
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(4)
    v, tab = torch.randn(3, 7, 5, generator=gen, dtype=DT), torch.randn(13, generator=gen, dtype=DT)
    leaves = [v.clone().requires_grad_(), tab.clone().requires_grad_()]
    want = leaves[1][_offsets(7)] @ leaves[0]
    grad_out = torch.randn(want.shape, generator=gen, dtype=DT)
    want_grads = torch.autograd.grad(want, leaves, grad_out)
    with Counting() as calls:
        out, saved = module.forward(v, tab)
        grads = module.backward(grad_out, saved)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-13)
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)
    assert not [c for c in calls.calls if "conv" in c], calls.calls

    causal, _ = imported(ROOT / "ops" / "causal_conv1d.py", tmp_path)
    x, w, b = (torch.randn(s, generator=gen, dtype=DT) for s in ((2, 3, 9), (3, 4), (3,)))
    with Counting() as calls:
        out, saved = causal.forward(x, w, b)
        causal.backward(torch.ones_like(out), saved)
    assert "mm" not in calls.calls and "bmm" not in calls.calls, calls.calls
