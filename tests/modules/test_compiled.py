"""The fuzzer's compiled mode (fuzz/compiled.py): modules under torch.compile (Inductor, one
graph) judged against the reference interpreter, and the finds it recorded.

The controls break a module only where it is compiled (``torch.compiler.is_compiling()``), so
the value check passes them and only this verdict can fail them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from derive.emit.generate import module_program
from fuzz.check import run_case
from fuzz.compiled import run_compiled_case
from fuzz.regressions import FOLDER, load, write
from fuzz.run import fuzz
from ops.linear import OP as LINEAR

FOUND = sorted(FOLDER.glob("compiled_*.py"))

# File stem -> why it fails compiled today (strict=False: a fix shows as XPASS; then remove it)
KNOWN = {
    "compiled_exception_inductorerror_s13200159": "Inductor's C++ for a gather's bounds check"
    " does not compile (dynamic shapes, sizes of 1); not located (docs/fuzzing.md, Open finds)",
    "compiled_exception_inductorerror_s13400041": "the class of 13200159 at sizes of 3 and 4: a"
    " bounds check of a variable the vectorised loop never declares; not located",
    "compiled_exception_inductorerror_s13400175": "Inductor asks a SymPy relational of sizes for"
    " its truth (1 < s50), dynamic shapes; not located",
    "compiled_gradient_value_s13200619": "Inductor runs a fused reader of a scatter's buffer"
    " between its zero-fill and its atomic adds: a wrong dWq under dynamic shapes; no"
    " workaround yet (docs/fuzzing.md, Open finds)",
}


def _param(path: Path):
    marks = [pytest.mark.xfail(strict=False, reason=KNOWN[path.stem])] if path.stem in KNOWN else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in FOUND])
def test_a_compiled_find_compiles_to_the_definitions(path: Path) -> None:
    op, seed = load(path)
    outcome = run_compiled_case(op, seed, timeout=120.0)
    assert outcome.status == "passed", f"{path.name}: {outcome.line()}"


def _patched(old: str, new: str):
    def source(op, folder):
        text = module_program(op, folder)
        assert old in text, f"the control's patch no longer applies: {old!r} not in the module"
        return text.replace(old, new)

    return source


COMPILING = "torch.compiler.is_compiling()"


@pytest.mark.parametrize("seed", [0, 1], ids=["static", "dynamic"])
def test_control_linear_passes_compiled(seed: int) -> None:
    assert run_compiled_case(LINEAR, seed).line() == "PASSED"


@pytest.mark.parametrize(
    "old, new, kind",
    [
        (
            "out = torch.addmm(b, x, W)",
            f"out = torch.addmm(b, x, W) * (1 + 1e-8 * {COMPILING})",
            "compiled forward value",
        ),
        (
            "db = _sum_leading(grad_out, 1)",
            f"db = _sum_leading(grad_out, 1) + 1e-8 * {COMPILING}",
            "compiled gradient value",
        ),
        (
            "out = torch.addmm(b, x, W)",
            "torch._dynamo.graph_break()\n    out = torch.addmm(b, x, W)",
            "compiled exception Unsupported",
        ),
    ],
    ids=["forward", "gradient", "graph break"],
)
@pytest.mark.parametrize("seed", [0, 1], ids=["static", "dynamic"])
def test_control_a_module_wrong_only_compiled_is_wrong(old, new, kind, seed) -> None:
    source = _patched(old, new)
    assert run_case(LINEAR, seed, source=source).status == "passed"  # eager cannot tell
    outcome = run_compiled_case(LINEAR, seed, source=source)
    assert (outcome.status, outcome.kind) == ("wrong", kind), outcome.line()
    assert outcome.detail.endswith(("static shapes", "dynamic shapes")[seed])


def test_a_compiled_find_is_recorded_as_compiled(tmp_path: Path) -> None:
    """Its file says it was found compiled and how to check it so (``--compiled``)."""
    source = _patched(
        "db = _sum_leading(grad_out, 1)", f"db = _sum_leading(grad_out, 1) + {COMPILING}"
    )
    outcome = run_compiled_case(LINEAR, 0, source=source)
    path = write(LINEAR, 0, outcome, LINEAR, folder=tmp_path)
    assert path is not None and path.name == "compiled_gradient_value_s0.py"
    text = path.read_text()
    assert "python -m fuzz --compiled`" in text and "run_compiled_case(OP, SEED)" in text


def test_every_known_entry_has_its_file() -> None:
    assert set(KNOWN) <= {p.stem for p in FOUND}


def test_a_compiled_run_reports_its_counts() -> None:
    out = io.StringIO()
    summary = fuzz([1000, 1001], shrink_wrong=False, max_definitions=2, out=out, compiled=True)
    assert len(summary.outcomes) == 2 and not summary.count("wrong"), out.getvalue()
    assert summary.count("passed") >= 1, out.getvalue()
