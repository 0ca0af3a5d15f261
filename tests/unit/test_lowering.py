"""One op, one expected emitted line, per lowering rule and fusion (exact strings, as SymPy's
printer tests do); the numbers behind them are checked in tests/test_check.py."""

from __future__ import annotations

import pytest

from derive import Op
from derive.emit.generate import module_source


def _lines(inputs: list[str], definitions: list[str], **kw) -> list[str]:
    text = module_source(Op("t", inputs, definitions, **kw), "out")
    return [line.strip() for line in text.splitlines()]


@pytest.mark.parametrize(
    ("inputs", "definitions", "line"),
    [
        # contraction over the shared axis, in the target's axis order, whatever the names
        (["x[N, I]", "z[N, J]"], ["out[i, j] = Sum(x[n, i] * z[n, j], n)"], "out = x.T @ z"),
        (["a[I, J]", "b[J, M]"], ["out[i, m] = Sum(a[i, j] * b[j, m], j)"], "out = a @ b"),
        # bias + matmul -> addmm
        (
            ["x[N, D]", "W[D, M]", "b[M]"],
            ["out[n, m] = Sum(x[n, k] * W[k, m], k) + b[m]"],
            "out = torch.addmm(b, x, W)",
        ),
        # Sum / extent -> mean
        (["x[N, M]"], ["out[m] = Sum(x[n, m], n) / N"], "out = x.mean(0)"),
        # a product over permuted axes: each operand permuted to the target's order
        (
            ["Zz[G, M]", "h[M, T]"],
            ["out[t, m, g] = Zz[g, m] * h[m, t]"],
            "out = Zz.T * h.T[:, :, None]",
        ),
        # a gather in the last position
        (
            ["z[N, C]", "t[N]: int64"],
            ["out[n] = z[n, t[n]]"],
            "out = z.gather(1, t.unsqueeze(1)).squeeze(1)",
        ),
        # a gather in a middle position: advanced indexing
        (
            ["x[I, C, S]", "t[I, S]: int64"],
            ["out[i, s] = x[i, t[i, s], s]"],
            "out = x[torch.arange(I, device=x.device)[:, None], t, torch.arange(S, device=x.device)]",  # noqa: E501
        ),
        # a diagonal
        (
            ["x[N, N]"],
            ["out[n] = x[n, n]"],
            "out = x[torch.arange(N, device=x.device), torch.arange(N, device=x.device)]",
        ),
        # a chain of three: one einsum, contracted pair by pair
        (
            ["a[I, J]", "b[J, K]", "c[K, L]"],
            ["out[i, l] = Sum(a[i, j] * b[j, k] * c[k, l], j, k)"],
            'out = torch.einsum("ad,dc,cb->ab", a, b, c)',
        ),
        # r + c a b -> addcmul; a function met twice is computed once
        (["x[N]"], ["out[n] = x[n] * tanh(x[n]) + tanh(x[n])"], "tanh_x = torch.tanh(x)"),
    ],
)
def test_emitted_line(inputs: list[str], definitions: list[str], line: str) -> None:
    assert line in _lines(inputs, definitions)


def test_pick_update_is_one_scatter_add() -> None:
    lines = _lines(["z[N, C]", "t[N]: int64"], ["out[n] = z[n, t[n]]"])
    assert "dz.scatter_add_(1, t.unsqueeze(1), grad_out.unsqueeze(1))" in lines


def test_delta_without_a_scatter_form_is_an_equality_mask() -> None:
    text = module_source(Op("t", ["x[N, N]"], ["out[n] = x[n, n]"]), "out")
    backward = text[text.index("def backward") :]
    assert "==" in backward and ".to(grad_out.dtype)" in backward


def test_relu_derivative_is_the_step() -> None:
    assert "dx = (x > 0).to(grad_out.dtype) * grad_out" in _lines(["x[N]"], ["out[n] = relu(x[n])"])
