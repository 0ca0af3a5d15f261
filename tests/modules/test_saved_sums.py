"""A sum written inside a definition costs the backward what the same sum named costs.

Two rules of :mod:`derive.symbolic.saving` and :mod:`derive.symbolic.canon`: a call over a sum
(``sigmoid(Sum_d x W)``, lifted and saved) is folded back to its name wherever the backward
writes it, whatever the sum's index is called there; and a contraction whose value the
backward needs (under a relu, beside another tensor's factor) is named and saved. Each op
below is written once inline and once with names; the reference is autograd through plain
torch ops written from the math (float64), and the count is of the contractions and
transcendental calls each backward makes, through a dispatch mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.modules.emitted import imported

DT = torch.float64
WORK = {"mm", "bmm", "addmm", "baddbmm", "matmul", "einsum", "sigmoid", "exp", "tanh"}


def _op_file(folder: Path, name: str, inputs: list[str], definitions: list[str]) -> Path:
    path = folder / f"{name}.py"
    path.write_text(
        "from derive import Op\n\n"
        f"OP = Op(name={name!r}, inputs={inputs!r}, definitions={definitions!r})\n"
    )
    return path


# (name, inputs, inline definitions, named definitions, plain torch reference, input shapes)
PAIRS = [
    (
        "gated_linear",
        ["x[N, D]", "W1[D, F]", "W3[D, F]"],
        ["out[n, f] = sigmoid(Sum(x[n, d] * W1[d, f], d)) * Sum(x[n, d] * W3[d, f], d)"],
        [
            "a[n, f] = Sum(x[n, d] * W1[d, f], d)",
            "b[n, f] = Sum(x[n, d] * W3[d, f], d)",
            "out[n, f] = sigmoid(a[n, f]) * b[n, f]",
        ],
        lambda x, w1, w3: torch.sigmoid(x @ w1) * (x @ w3),
        [(6, 5), (5, 4), (5, 4)],
    ),
    (
        "relu_mlp",
        ["x[N, D]", "W1[D, F]", "W2[F, M]"],
        ["out[n, m] = Sum(relu(Sum(x[n, d] * W1[d, f], d)) * W2[f, m], f)"],
        [
            "h[n, f] = Sum(x[n, d] * W1[d, f], d)",
            "out[n, m] = Sum(relu(h[n, f]) * W2[f, m], f)",
        ],
        lambda x, w1, w2: torch.relu(x @ w1) @ w2,
        [(6, 5), (5, 7), (7, 3)],
    ),
    (
        "relu_layer_with_bias",
        ["x[N, D]", "W1[D, F]", "b1[F]", "W2[F, M]"],
        [
            "h[n, f] = relu(Sum(x[n, d] * W1[d, f], d) + b1[f])",
            "out[n, m] = Sum(h[n, f] * W2[f, m], f)",
        ],
        [
            "pre[n, f] = Sum(x[n, d] * W1[d, f], d) + b1[f]",
            "h[n, f] = relu(pre[n, f])",
            "out[n, m] = Sum(h[n, f] * W2[f, m], f)",
        ],
        lambda x, w1, b1, w2: torch.relu(x @ w1 + b1) @ w2,
        [(6, 5), (5, 7), (7,), (7, 3)],
    ),
    (
        "product_of_projections",
        ["x[N, D]", "W1[D, F]", "W3[D, F]"],
        ["out[n, f] = tanh(Sum(x[n, d] * W1[d, f], d) * Sum(x[n, d] * W3[d, f], d))"],
        [
            "a[n, f] = Sum(x[n, d] * W1[d, f], d)",
            "b[n, f] = Sum(x[n, d] * W3[d, f], d)",
            "out[n, f] = tanh(a[n, f] * b[n, f])",
        ],
        lambda x, w1, w3: torch.tanh((x @ w1) * (x @ w3)),
        [(6, 5), (5, 4), (5, 4)],
    ),
    (
        "gaussian_kernel",
        ["x[N, K]", "y[M, K]"],
        ["out[n, m] = exp(-Sum((x[n, k] - y[m, k])**2, k))"],
        ["d2[n, m] = Sum((x[n, k] - y[m, k])**2, k)", "out[n, m] = exp(-d2[n, m])"],
        lambda x, y: torch.exp(-((x[:, None, :] - y[None, :, :]) ** 2).sum(2)),
        [(6, 3), (5, 3)],
    ),
]


class _Work(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in WORK:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


def _run(module, args: list, grad_out: torch.Tensor) -> tuple:
    out, saved = module.forward(*args)
    with _Work() as work:
        grads = module.backward(grad_out, saved)
    return out, grads, sorted(work.calls)


@pytest.mark.parametrize(
    ("name", "inputs", "inline", "named", "ref", "shapes"), PAIRS, ids=[p[0] for p in PAIRS]
)
def test_inline_sum_costs_what_named_costs(
    name, inputs, inline, named, ref, shapes, tmp_path: Path
) -> None:
    gen = torch.Generator().manual_seed(5)
    args = [torch.randn(s, generator=gen, dtype=DT) for s in shapes]
    leaves = [a.clone().requires_grad_() for a in args]
    want = ref(*leaves)
    grad_out = torch.randn(want.shape, generator=gen, dtype=DT)
    want_grads = torch.autograd.grad(want, leaves, grad_out)
    work = {}
    for form, definitions in (("inline", inline), ("named", named)):
        module, _ = imported(_op_file(tmp_path, f"{name}_{form}", inputs, definitions), tmp_path)
        out, grads, work[form] = _run(module, args, grad_out)
        torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-13)
        for got, expected in zip(grads, want_grads, strict=True):
            torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)
    assert len(work["inline"]) <= len(work["named"]), work
