"""Functions of one tensor each, under one sum, are computed apart and contracted.

``sum_i x[n, i]**2 V[i, k]**2`` (a factorization machine's pairwise term) is ``(x * x) @ (V *
V)``; grouped into one element-wise factor, the two squares were a broadcast product over
every index of the sum, an (N, I, K) temporary (1.78x autograd's time and 5.6x its memory,
found probing; :func:`derive.lower.reductions._functions_apart`). The reference is autograd
through plain torch (float64); the width is the most entries of any tensor the forward and
backward make, through a dispatch mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.widest import Widest
from tests.modules.emitted import imported

DT = torch.float64


CASES = [
    (
        "out[n, k] = Sum(x[n, i]**2 * V[i, k]**2, i)",
        lambda x, v: (x * x) @ (v * v),
    ),
    (
        "out[n, k] = Sum((x[n, i] + 1)**3 * relu(V[i, k]), i)",
        lambda x, v: (x + 1) ** 3 @ torch.relu(v),
    ),
]


@pytest.mark.parametrize(("definition", "ref"), CASES, ids=["squares", "cube_relu"])
def test_functions_of_one_tensor_each_are_a_matmul(definition, ref, tmp_path: Path) -> None:
    inputs = ["x[N, I]", "V[I, K]"]
    path = tmp_path / "fm.py"
    path.write_text(
        f"from derive import Op\n\nOP = Op(name='fm', inputs={inputs!r},"
        f" definitions=[{definition!r}])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(2)
    args = [torch.randn(s, generator=gen, dtype=DT) for s in ((9, 7), (7, 8))]
    leaves = [a.clone().requires_grad_() for a in args]
    with Widest() as autograd:
        want = ref(*leaves)
        grad_out = torch.randn(want.shape, generator=gen, dtype=DT)
        want_grads = torch.autograd.grad(want, leaves, grad_out)
    with Widest() as generated:
        out, saved = module.forward(*args)
        grads = module.backward(grad_out, saved)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-13)
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)
    # no wider than autograd's: the (N, I, K) product was 9 times wider than its (N, K)
    assert generated.entries <= autograd.entries, (generated.entries, autograd.entries)
