"""The last IR pass, kernels written into their spare operands (derive/ir/reuse.py): one op,
one expected line, as tests/unit/test_lowering.py holds the lowering's. The values are held
by tests/modules/test_into.py (every case, with buffers taken and with none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from derive import Op
from derive.emit.generate import module_source

ROOT = Path(__file__).resolve().parents[2]


def _lines(inputs: list[str], definitions: list[str]) -> list[str]:
    text = module_source(Op("t", inputs, definitions), "out")
    return [line.strip() for line in text.splitlines()]


@pytest.mark.parametrize(
    ("inputs", "definitions", "line"),
    [
        # a function of a product: tanh into the product
        (["x[N]", "y[N]"], ["out[n] = tanh(x[n] * y[n])"], "out = _into(torch.tanh, x * y)"),
        # addcmul into its third operand, the square made for it
        (
            ["x[N]"],
            ["out[n] = (Rational(1, 3) * x[n]**2 + 1) * x[n]"],
            "out = _into(_addcmul, x, x, x * x, 1 / 3, into=2)",
        ),
        # a number minus a new tensor: negated, then the number added, both in place
        (
            ["x[N]"],
            ["out[n] = 1 - x[n] * x[n]"],
            "out = _into(torch.add, _into(torch.neg, x * x), 1)",
        ),
        # a number as an argument needs no parentheses of its own
        (["x[N]"], ["out[n] = 1 - x[n] * x[n]"], "dx = _into(torch.mul, grad_out * x, -2)"),
        # a name read last, once, and freed after: dy writes into what dx read first
        (
            ["x[N]", "y[N]"],
            ["h[n] = x[n] * y[n]", "out[n] = tanh(h[n]) + 2"],
            "dy = _into(torch.mul, shared_grad_out_tanh_h, x)",
        ),
    ],
)
def test_emitted_line(inputs: list[str], definitions: list[str], line: str) -> None:
    assert line in _lines(inputs, definitions)


def test_no_buffer_broadcast_smaller_saved_or_read_again() -> None:
    # a * 2 is over n alone, the result over (n, m): broadcast, it cannot hold it
    lines = _lines(["a[N]", "x[N, M]"], ["out[n, m] = a[n] * 2 * x[n, m]"])
    assert "out = (a * 2)[:, None] * x" in lines
    # exp(x) is saved for the backward: a name handed on is never a buffer
    lines = _lines(["x[N]", "y[N]"], ["out[n] = exp(x[n]) * y[n]"])
    assert "out = out_exp0 * y" in lines
    # read by dx and dy: dx, which does not read it last, makes a new tensor
    lines = _lines(["x[N]", "y[N]"], ["h[n] = x[n] * y[n]", "out[n] = tanh(h[n]) + 2"])
    assert "dx = shared_grad_out_tanh_h * y" in lines


def test_index_arithmetic_is_left_as_written() -> None:
    """max_pool2d's argmax arithmetic (int tensors, aranges) takes no buffer: ``_into``
    would decline an int one at run time, and the line would only read worse."""
    text = (ROOT / "generated" / "max_pool2d.py").read_text()
    assert "_into(" not in text
    assert "out_argmax.reshape(N, C, HO, WO)" in text
