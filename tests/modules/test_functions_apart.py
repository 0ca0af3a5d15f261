"""Functions of one tensor each, under one sum, are computed apart and contracted.

``sum_i x[n, i]**2 V[i, k]**2`` (a factorization machine's pairwise term) is ``(x * x) @ (V *
V)``; grouped into one element-wise factor, the two squares were a broadcast product over
every index of the sum, an (N, I, K) temporary (1.78x autograd's time and 5.6x its memory,
found probing; :func:`derive.lower.reductions._functions_apart`). So is element-wise work
beside it that holds sums: a GLU's ``dW1 = sum_n (s4[n, e] + s5[n, e]) relu(h[n, d])``, the
two sums' adjoints beside the activation, was an (N, D, D) product (3.1x autograd's time, 39x
its memory, found probing), and an ELU written as a where() the same (7.4x and 34x in a gated
residual block). The reference is autograd through plain torch (float64); the width is the
most entries of any tensor the forward and backward make, through a dispatch mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.modules.emitted import against_autograd, imported

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
    generated, autograd = against_autograd(module, args, ref, gen)
    # no wider than autograd's: the (N, I, K) product was 9 times wider than its (N, K)
    assert generated <= autograd, (generated, autograd)


ACTIVATIONS = [
    ("relu(h[n, d])", torch.relu),
    ("where(h[n, d] > 0, h[n, d], exp(h[n, d]) - 1)", torch.nn.functional.elu),
]


@pytest.mark.parametrize(("activation", "ref"), ACTIVATIONS, ids=["relu", "elu"])
def test_an_activation_beside_a_sum_of_sums_is_a_matmul(activation, ref, tmp_path: Path) -> None:
    path = tmp_path / "glu.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='glu', inputs=['h[N, D]', 'W1[D, E]', 'W4[E, F]',"
        f" 'W5[E, F]'], definitions=['eta[n, e] = Sum({activation} * W1[d, e], d)', 'out[n, f] ="
        " sigmoid(Sum(eta[n, e] * W4[e, f], e)) * Sum(eta[n, e] * W5[e, f], e)'])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(4)
    args = [torch.randn(s, generator=gen, dtype=DT) for s in ((12, 5), (5, 6), (6, 7), (6, 7))]

    def glu(h, w1, w4, w5):
        eta = ref(h) @ w1
        return torch.sigmoid(eta @ w4) * (eta @ w5)

    generated, autograd = against_autograd(module, args, glu, gen)
    # the (N, D, E) product was 360 entries against autograd's 84
    assert generated <= autograd, (generated, autograd)
