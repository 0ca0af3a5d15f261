"""Generated ops on tensors that carry shapes only, as PyTorch's own ops run there.

FakeTensorMode (shape inference, memory estimates before allocating, deferred init) and the
meta device run an op for its output's shape, dtype and device: the forward and the backward
must run without reading a value. The index range checks read their index's values; under
FakeTensorMode that raised torch's ``DataDependentOutputException`` where a gather by torch
itself runs (found by probing: ``tests/cases/several_picks_a_row.py``).
"""

from __future__ import annotations

import glob
import importlib
import runpy
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from derive.language import parse
from derive.verify.check import defined_inputs
from tests.modules.emitted import imported

CATALOGUE = sorted(glob.glob("ops/*.py"))
CASES = Path(__file__).resolve().parents[1] / "cases"


def _shapes_on(module, inputs, convert):
    leaves = [convert(t).requires_grad_(t.is_floating_point()) for t in inputs]
    out = module.Function.apply(*leaves)
    out.sum().backward()
    return out.shape, [t.grad.shape for t in leaves if t.is_floating_point()]


def _fake(module, inputs):
    want = _shapes_on(module, inputs, torch.clone)
    with FakeTensorMode() as mode:
        assert _shapes_on(module, inputs, mode.from_tensor) == want


def _meta(module, inputs):
    want = _shapes_on(module, inputs, torch.clone)
    assert _shapes_on(module, inputs, lambda t: t.to("meta")) == want


@pytest.mark.parametrize("run", [_fake, _meta], ids=["fake", "meta"])
@pytest.mark.parametrize("path", CATALOGUE)
def test_catalogue_on_shape_only_inputs(path, run):
    op = runpy.run_path(path)["OP"]
    module = importlib.import_module(f"generated.{op.name}")
    run(module, defined_inputs(parse(op), 0)[0])


@pytest.mark.parametrize("run", [_fake, _meta], ids=["fake", "meta"])
@pytest.mark.parametrize("case", ["several_picks_a_row", "lifted_diagonal"])
def test_gathers_checked_by_value_on_shape_only_inputs(case, run, tmp_path):
    """Ops whose index is read by a gather the forward checks itself (no kernel rejects a bad
    index there): the check is skipped where there are no values, as on the meta device."""
    module, op = imported(CASES / f"{case}.py", tmp_path)
    run(module, defined_inputs(parse(op), 0)[0])
