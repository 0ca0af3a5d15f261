"""A recurrent cell's gate gradients are stacked once and contracted once per weight.

An LSTM reads its four gates as slices ``gt[n, g, j]`` of one projection through ``Wx[i, g,
j]``; the derivation solves the gates' deltas, so dx is ``sum_g dgate_g @ Wx[:, g].T``, four
matmuls, and dWx ``sum_n x[n, i] sum_g delta(g, c) dgate_c[n, j]``, four masks over a (4, J,
N) product (2.67x autograd's peak memory at (4096, 256), found probing). Now the sibling
pass reads a matmul as the contraction it is (``derive.ir.passes._as_contract``: one matmul
of the stacked gate gradients, as autograd's dgates), and the deltas of dWx's result axis
come out of its sum (``derive.lower.assign._deltas_out_of_sums``: a stack of matmuls, then
one). Against autograd through plain torch (float64); products counted by a dispatch mode.
"""

from __future__ import annotations

from pathlib import Path

import torch

from bench.aten_calls import Counting
from bench.widest import Widest
from tests.modules.emitted import imported

DT = torch.float64
LSTM = (
    "from derive import Op\n\nOP = Op(name='lstm', inputs=['x[N, I]', 'h[N, J]', 'c[N, J]',"
    " 'Wx[I, 4, J]', 'Wh[J, 4, J]', 'b[4, J]'], definitions=["
    "'gt[n, g, j] = Sum(x[n, i] * Wx[i, g, j], i) + Sum(h[n, k] * Wh[k, g, j], k) + b[g, j]',"
    " 'cn[n, j] = sigmoid(gt[n, 1, j]) * c[n, j] + sigmoid(gt[n, 0, j]) * tanh(gt[n, 2, j])',"
    " 'out[n, j] = sigmoid(gt[n, 3, j]) * tanh(cn[n, j])'])\n"
)


def _lstm(x, h, c, wx, wh, b):
    gt = torch.einsum("ni,igj->ngj", x, wx) + torch.einsum("nk,kgj->ngj", h, wh) + b
    cn = torch.sigmoid(gt[:, 1]) * c + torch.sigmoid(gt[:, 0]) * torch.tanh(gt[:, 2])
    return torch.sigmoid(gt[:, 3]) * torch.tanh(cn)


def test_an_lstm_cell_contracts_its_stacked_gate_gradients(tmp_path: Path) -> None:
    path = tmp_path / "lstm.py"
    path.write_text(LSTM)
    module, _ = imported(path, tmp_path)
    n, i, j = 64, 5, 6
    gen = torch.Generator().manual_seed(5)
    shapes = ((n, i), (n, j), (n, j), (i, 4, j), (j, 4, j), (4, j))
    args = [torch.randn(s, generator=gen, dtype=DT) for s in shapes]
    leaves = [a.clone().requires_grad_() for a in args]
    with Widest() as autograd:
        want = _lstm(*leaves)
        grad_out = torch.randn(want.shape, generator=gen, dtype=DT)
        want_grads = torch.autograd.grad(want, leaves, grad_out)
    out, saved = module.forward(*args)
    with Widest() as generated, Counting() as calls:
        grads = module.backward(grad_out, saved)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-13)
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)
    # dx, dh, dWx, dWh: one product each (10 before: dx's and dh's one per gate)
    assert sum(calls.calls[k] for k in ("mm", "addmm", "bmm")) == 4, calls.calls
    # no temporary wider than autograd's dgates
    assert generated.entries <= autograd.entries, (generated.entries, autograd.entries)
