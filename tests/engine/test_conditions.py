"""== and != in where() compare values, and a second reading of the text catches a misread one.

SymPy's ``c != t[n]`` is a structural comparison, True at parse time, so the where() vanished
and the op summed every class: wrong by margin/C for a multi-margin loss, and every check
agreed, because the reference interpreter reads the same parsed expression. These tests hold
the comparisons to torch's own losses, and show that :mod:`derive.verify.oracle` (the strings,
read without the parse) catches such a misreading where the shared-parse reference cannot.
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import runpy

import pytest
import torch
import torch.nn.functional as F

from derive import Op
from derive.emit.generate import module_program
from derive.errors import CheckFailed, DerivationError
from derive.functions import ALIASES, FUNCTIONS
from derive.language import parse
from derive.verify.check import check_seed, defined_inputs
from derive.verify.oracle import FUNCTIONS as ORACLE_FUNCTIONS
from derive.verify.oracle import oracle_output
from derive.verify.reference import evaluate
from fuzz.check import load_module

MULTI_MARGIN = Op(
    name="multi_margin",
    doc="torch's multi_margin_loss: sum over the classes but the target, mean over N.",
    inputs=["x[N, C]", "y[N]: int64"],
    params={"margin": 1.0},
    definitions=[
        "loss = Sum(where(c != y[n], relu(margin - x[n, y[n]] + x[n, c]), 0), n, c) / (C*N)"
    ],
)
HINGE = Op(
    name="hinge",
    doc="hinge on labels +-1 read by value: y == 1 takes the first branch.",
    inputs=["x[N, M]", "y[N, M]"],
    definitions=["out = Sum(where(y[n, m] == 1, relu(1 - x[n, m]), relu(1 + x[n, m])), n, m)"],
)
PICK = Op(
    name="pick",
    doc="a pick written as a comparison: the sum over c keeps c == t[n] alone.",
    inputs=["x[N, C]", "t[N]: int64"],
    definitions=["out[n] = Sum(where(c == t[n], exp(x[n, c]), 0), c)"],
)


def _load(op: Op, tmp_path):
    return load_module(module_program(op, tmp_path), op.name, tmp_path)


def test_not_equal_is_torch_multi_margin_loss(tmp_path):
    f = _load(MULTI_MARGIN, tmp_path).Function.apply
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(7, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    y = torch.randint(0, 5, (7,), generator=gen)
    mine, want = f(x, y), F.multi_margin_loss(x, y)
    assert torch.allclose(mine, want, rtol=0, atol=1e-12)
    (g_mine,), (g_want,) = torch.autograd.grad(mine, x), torch.autograd.grad(want, x)
    assert torch.allclose(g_mine, g_want, rtol=0, atol=1e-12)


def test_equal_of_float_values_and_of_data(tmp_path):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    y = torch.randint(0, 2, (4, 3), generator=gen).double() * 2 - 1
    hinge = _load(HINGE, tmp_path).Function.apply(x, y)
    assert torch.allclose(hinge, torch.where(y == 1, F.relu(1 - x), F.relu(1 + x)).sum())
    t = torch.randint(0, 3, (4,), generator=gen)
    pick = _load(PICK, tmp_path).Function.apply(x, t)
    assert torch.allclose(pick, x.exp().gather(1, t[:, None])[:, 0])


@pytest.mark.parametrize(
    "definition, message",
    [
        ("out[n] = Sum(where(0 <= c < 2, x[n, c], 0), c)", "chained comparison"),
        ("out[n] = Sum(where(c > 0 and c < 2, x[n, c], 0), c)", "'and'"),
        ("out[n] = Sum(where(c < 1 or c > 2, x[n, c], 0), c)", "'or'"),
        ("out[n] = Sum(where(not c > 0, x[n, c], 0), c)", "'not'"),
        ("out[n] = Sum(where((c > 0) & (c < 2), x[n, c], 0), c)", "'&' in"),  # probing: it
        ("out[n] = Sum(where((c < 1) | (c > 2), x[n, c], 0), c)", "'|' in"),  # said "outside"
        ("out[n] = Sum(x[n, c] if c > 0 else 0, c)", "where(c, a, b)"),
        ("out[n] = Sum(where(c is 1, x[n, c], 0), c)", "use ==, !=, <, <=, > or >="),
        ("out[n] = Sum(where(c in t, x[n, c], 0), c)", "use ==, !=, <, <=, > or >="),
        ("out[n] = Sum(x[n, c] * (c != 0), c)", "'c != 0' outside a where() condition"),
        ("out[n] = Sum(where(c != (n < 2), x[n, c], 0), c)", "'n < 2' outside a where()"),
        ("out[n] = Sum(x[n, c] ** (c == 1), c)", "'c == 1' outside a where() condition"),
        ("y = view(x, N == 2, C)", "'N == 2' outside a where() condition"),
    ],
)
def test_conditions_the_language_cannot_mean_are_refused(definition, message):
    op = Op(name="cond", doc="", inputs=["x[N, C]", "t[N]: int64"], definitions=[definition])
    with pytest.raises(DerivationError) as info:
        parse(op)
    assert message in str(info.value) and "op 'cond'" in str(info.value)


@pytest.mark.parametrize("size", ["C == 2", "C != 2", "C < 2"])
def test_a_comparison_is_no_size(size):
    op = Op(
        name="cond",
        doc="",
        inputs=["x[N, C]"],
        sizes={"D": size},
        definitions=["out[n, c] = x[n, c]"],
    )
    with pytest.raises(DerivationError, match="is a comparison, not a size"):
        parse(op)


def test_the_oracle_catches_a_misread_condition(tmp_path, monkeypatch):
    """Parse != as SymPy did (structurally, True): the shared-parse reference agrees with the
    wrong module; the text oracle does not."""
    parse_module = importlib.import_module("derive.language.parse")  # the module, not parse()
    monkeypatch.setattr(parse_module, "relations_as_calls", lambda text: text)
    wrong = Op(**{**MULTI_MARGIN.__dict__, "name": "misread"})
    assert "where" not in str(parse(wrong).steps[-1].body)  # the misreading, reproduced
    module, g = _load(wrong, tmp_path), parse(wrong)
    inputs, _ = defined_inputs(g, 0)
    named = dict(zip(g.inputs, inputs, strict=True))
    out, _ = module.forward(*inputs)
    assert torch.allclose(out, evaluate(g, named)[g.output])  # blind: same parse, same answer
    with pytest.raises(CheckFailed, match="independently of the parse"):
        check_seed(module, g, 0)


CATALOGUE = sorted(glob.glob("ops/*.py")) + sorted(glob.glob("tests/cases/*.py"))


@pytest.mark.parametrize("path", CATALOGUE)
def test_the_two_readings_agree_on_every_catalogue_op_and_case(path):
    op = runpy.run_path(path)["OP"]
    g = parse(op)
    inputs, _ = defined_inputs(g, 0)
    named = dict(zip(g.inputs, inputs, strict=True))
    want = evaluate(g, named)[g.output]
    got = oracle_output(op, named)
    assert got.shape == want.shape
    assert float((got - want).abs().max()) <= 1e-10 * max(1.0, float(want.abs().max()))


def test_the_oracle_reads_every_function_of_the_language():
    assert set(FUNCTIONS) | set(ALIASES) <= set(ORACLE_FUNCTIONS) | {"where"}  # where: a node


def test_the_text_oracle_reads_an_index_as_a_number_in_the_data_dtype():
    """``sin(0.25*t)``: int64 * 0.25 is float32 in torch; the oracle took it so and was off by
    3e-8 in a float64 op (fuzz --windows 10521: judged wrong, the module right). Here against
    the float64 formula by hand, and the reference interpreter, to the last ulps."""
    op = Op(name="phase", inputs=["x[T, D]"], definitions=["out[t, d] = x[t, d] * sin(0.25*t)"])
    x = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    want = x * torch.sin(0.25 * torch.arange(7, dtype=torch.float64))[:, None]
    got = oracle_output(op, {"x": x})
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-15, atol=1e-15)
    g = parse(op)
    torch.testing.assert_close(evaluate(g, {"x": x})[g.output], want, rtol=1e-15, atol=1e-15)
