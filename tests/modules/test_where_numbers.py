"""where() of two numbers, lowered: exactly torch.where's value in every float dtype.

The lowering may write ``where(c, a, b)`` as mask arithmetic, ``c * (a - b) + b``, one pass
that fuses with what reads it. That is exact only for some pairs: (3 - 1e17) + 1e17 is 0 in
float64, and 0 * inf is nan. The reference here is torch.where of the numbers as written in the
definition text, compared bit for bit.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from derive import Op
from derive.emit.generate import module_source
from derive.verify.check import load_module

PAIRS = [
    ("1", "-1"),  # small integers: the mask arithmetic is exact, and is kept
    ("2", "0"),
    ("0", "-3"),
    ("3", "1e17"),  # (3 - 1e17) + 1e17 = 0: a silently wrong forward before
    ("0.3", "0.7"),  # -0.4 + 0.7 = 0.30000000000000004
    ("257", "1"),  # 256 + 1 = 257 is no bfloat16
    ("inf", "0"),
    ("0", "-inf"),
    ("1e308", "-1e308"),  # a - b overflows
    ("pi", "2"),
]
DTYPES = [torch.float64, torch.float32, torch.bfloat16]


def _number(text: str) -> float:
    return {"inf": math.inf, "-inf": -math.inf, "pi": math.pi}.get(text) or float(text)


@pytest.mark.parametrize("a, b", PAIRS, ids=lambda v: str(v))
def test_a_where_of_numbers_is_torch_where(a: str, b: str, tmp_path: Path) -> None:
    op = Op(
        name="where_numbers",
        inputs=["x[N, C]"],
        definitions=[f"out[n, c] = x[n, c] * where(x[n, c] > 0, {a}, {b})"],
    )
    path = tmp_path / "where_numbers.py"
    path.write_text(module_source(op, str(tmp_path)))
    module = load_module(path)
    for dtype in DTYPES:
        x = torch.tensor([[1.5, -2.0, 0.0], [0.25, -0.5, 3.0]], dtype=dtype)
        out, _ = module.forward(x)
        # the written number in float64, rounded to the dtype (1e308 is inf in float32)
        a_, b_ = (torch.tensor(_number(v), dtype=torch.float64).to(dtype) for v in (a, b))
        want = x * torch.where(x > 0, a_, b_)
        assert out.dtype == dtype
        assert torch.equal(out.isnan(), want.isnan()), (a, b, dtype, out, want)
        same = (out == want) | (out.isnan() & want.isnan())
        assert same.all(), (a, b, dtype, out, want)


def test_exact_pairs_keep_the_mask_arithmetic(tmp_path: Path) -> None:
    op = Op(name="m", inputs=["x[N]"], definitions=["out[n] = x[n] * where(x[n] > 0, 1, -1)"])
    assert ".to(x.dtype)" in module_source(op, str(tmp_path))
