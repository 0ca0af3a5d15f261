"""Definitions that read no tensor are constants, taken into the definitions that read them
(derive/language/constants.py), held to the text oracle, which evaluates each definition,
constants too, from its string."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from derive import DerivationError, Op
from derive.emit.generate import module_source
from derive.verify.check import load_module
from derive.verify.oracle import oracle_output


def _module(op: Op, folder: Path):
    path = folder / f"{op.name}.py"
    path.write_text(module_source(op, "out"))
    return load_module(path)


def test_a_constant_summed_over_an_index_its_reader_uses_keeps_its_own(tmp_path: Path) -> None:
    """``c[t] = Sum(where(k <= t, 1, 0), k)`` is t + 1; read as ``c[k]`` under a reader's own k,
    its summed k must not become the reader's (which would count where(k <= k): K)."""
    op = Op(
        name="counted",
        inputs=["x[K]"],
        ranges={"t": "K", "k": "K"},
        definitions=["c[t] = Sum(where(k <= t, 1, 0), k)", "out[k] = x[k] * c[k]"],
    )
    module = _module(op, tmp_path)
    x = torch.randn(7, dtype=torch.float64)
    out, saved = module.forward(x)
    weights = torch.arange(1, 8, dtype=torch.float64)
    assert torch.equal(oracle_output(op, {"x": x}), x * weights)
    assert torch.allclose(out, x * weights, rtol=0, atol=1e-12)
    g = torch.randn(7, dtype=torch.float64)
    (dx,) = module.backward(g, saved)
    assert torch.allclose(dx, g * weights, rtol=0, atol=1e-12)


def test_a_view_of_a_constant_is_refused_in_one_line(tmp_path: Path) -> None:
    op = Op(
        name="viewed",
        inputs=["x[N]"],
        ranges={"n": "N"},
        definitions=["d[n] = n", "v = view(d, N)", "out[n] = x[n] * v[n]"],
    )
    with pytest.raises(DerivationError, match="read it with indices") as info:
        module_source(op, tmp_path)
    assert "\n" not in str(info.value) and info.value.definition == "v = view(d, N)"
