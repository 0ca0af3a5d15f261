"""``python -m derive show``: every catalogue op in all three modes, user op files, bad names."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest
import sympy as sp

from derive.__main__ import main
from derive.emit.generate import emit, load_op
from derive.emit.statements import Statement
from derive.explain.catalogue import catalogue
from derive.explain.excerpt import excerpts
from derive.explain.explain import Explanation, explain
from derive.explain.latex import latex
from derive.explain.show import render_json, render_latex, render_text
from tests.op_table import SIGMOID
from tests.tools.test_formulas import markdown_formulas, mathtext_error

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = sorted(catalogue())


@pytest.fixture(scope="module")
def explained() -> dict[str, Explanation]:
    """Each catalogue op derived and emitted once (its module is the checked-in one: see
    test_regenerate), for the whole module: deriving is the slow part."""
    return {name: explain(emit(load_op(path), "generated")) for name, path in catalogue().items()}


@pytest.fixture(scope="module")
def published() -> set[str]:
    """The formulas of FORMULAS.md, each parsed by mathtext in tests/tools/test_formulas.py."""
    return set(markdown_formulas((ROOT / "generated" / "FORMULAS.md").read_text()))


def _latex_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("%")]


@pytest.mark.parametrize("name", CATALOGUE)
def test_show_every_op_in_three_modes(
    explained: dict[str, Explanation], published: set[str], name: str
) -> None:
    ex = explained[name]
    text = render_text(ex, width=100)
    assert text.startswith(f"{name}: ") and "Forward" in text
    for step in ex.steps:
        assert f"── {step.adjoint} " in text and "chain rule:" in text
    lines = _latex_lines(render_latex(ex))
    assert len(lines) == len(ex.forward) + sum(len(s.forms()) for s in ex.steps)
    assert set(lines) <= published, "show --latex prints the formulas FORMULAS.md carries"
    record = json.loads(render_json(ex))
    assert {"op", "definitions", "adjoints", "steps"} <= set(record)
    assert record["op"] == name and len(record["definitions"]) == len(ex.forward)
    for adjoint in record["adjoints"].values():
        assert {"raw", "simplified", "emitted"} <= set(adjoint)
        assert adjoint["emitted"], "every computed adjoint has its torch lines"
        for form in ("raw", "simplified"):  # only --json prints these (the inlined raw) alone
            assert mathtext_error(adjoint[form]["latex"]) is None, adjoint[form]["latex"]
    for step in record["steps"]:
        for form in ("chain", "simplified", "collapsed"):
            assert step[form] is None or step[form]["latex"] in {
                line.split(" = ", 1)[1] for line in lines
            }


def test_steps_come_from_the_module_as_emitted(explained: dict[str, Explanation]) -> None:
    for ex in explained.values():
        module = {ast.dump(s) for s in ast.walk(ast.parse(ex.module)) if isinstance(s, ast.stmt)}
        for step in ex.steps:
            for stmt in ast.parse(step.emitted or "").body:
                assert ast.dump(stmt) in module, f"{ex.op.name}: {step.adjoint}"


def test_steps_are_formatted_as_the_module_has_them(explained: dict[str, Explanation]) -> None:
    # the excerpts are black-formatted in one call, as function bodies: each must read line for
    # line as it stands in the module's backward (one level deep), wrapped lines included; a
    # statement under the guard of the gradients it feeds (``if needs[0]:``) stands a level
    # deeper there, where black may wrap it otherwise: it is found with its spacing ignored
    for ex in explained.values():
        flat = "".join(ex.module.split())
        for step in ex.steps:
            if not step.emitted:
                continue
            indented = textwrap.indent(step.emitted, "    ")
            if all(block in ex.module for block in indented.split("\n")):
                continue
            for node in ast.parse(step.emitted).body:
                code = ast.get_source_segment(step.emitted, node)
                assert "".join(code.split()) in flat, (step.adjoint, code)


def test_cross_entropy_collapses(explained: dict[str, Explanation]) -> None:
    steps = {s.tensor: s for s in explained["cross_entropy"].steps}
    # the max-subtraction's shift is unseen: the chain rule's sum is shown, then its 0
    maxes = steps["logit_maxes"]
    assert maxes.unseen and maxes.chain != 0 and maxes.forms()[-1][1] == 0
    logits = steps["logits"]
    assert logits.computed == "collapsed" and logits.chain.has(sp.KroneckerDelta)
    # printed as the seeds write it: grad_out * (softmax - onehot) / N
    assert latex(logits.collapsed) == (
        r"\dfrac{\mathrm{grad\_out}\,\left({\mathrm{probs}}_{n,c} - "
        r"\delta_{c,{\mathrm{targets}}_{n}}\right)}{N}"
    )


def test_batchnorm_chain_collapses_to_closed_form(explained: dict[str, Explanation]) -> None:
    x = next(s for s in explained["batchnorm"].steps if s.tensor == "x")
    assert x.computed == "collapsed" and "dbnmeani" in str(x.chain)
    assert {"bnraw", "bnvar_inv", "gain"} <= {
        i.base.label.name for i in x.collapsed.atoms(sp.Indexed)
    }
    assert "N - 1" in str(x.collapsed) and "dbndiff" not in str(x.collapsed)


def test_cli_show_modes(capsys: pytest.CaptureFixture) -> None:
    assert main(["show", "tanh", "--width", "80"]) == 0
    assert "dx[batch] = " in capsys.readouterr().out
    assert main(["show", "tanh", "--latex"]) == 0
    assert r"{\mathrm{dx}}_{\mathrm{batch}}" in capsys.readouterr().out
    assert main(["show", "tanh", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["adjoints"]["x"]["emitted"].startswith("dx = ")


def test_several_ops_in_one_run(capsys: pytest.CaptureFixture) -> None:
    assert main(["show", "tanh", "relu", "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert out.index("tanh: ") < out.index("\n\nrelu: "), "each op in turn, a blank line apart"
    # one bad op is one line; the others are still shown, and JSON stays one document
    assert main(["show", "tanh", "softmax_typo", "relu", "--json"]) == 2
    captured = capsys.readouterr()
    assert [r["op"] for r in json.loads(captured.out)] == ["tanh", "relu"]
    assert captured.err.count("\n") == 1 and "softmax_typo" in captured.err


def test_unknown_op_lists_the_known_ones(capsys: pytest.CaptureFixture) -> None:
    assert main(["show", "softmax_typo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert all(name in err for name in CATALOGUE)


def test_user_op_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "my_op.py"
    path.write_text(SIGMOID)
    assert main(["show", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["op"] == "sigmoid" and record["adjoints"]["x"]["emitted"].startswith("dx = ")
    path.write_text(SIGMOID.replace("x[n, m]))", "x[n, q]))"))
    assert main(["show", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: op 'sigmoid'") and "index q" in err


def _recorded(stmt: ast.stmt) -> Statement:
    """A statement as emission records it (the names it writes and reads), made here from its
    syntax tree: emission itself never parses code."""
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
    while isinstance(target, ast.Subscript):
        target = target.value
    reads = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    return Statement(ast.unparse(stmt), frozenset({target.id}), frozenset(reads))


def test_excerpt_follows_temporaries_not_other_gradients() -> None:
    source = '''
def backward(grad_out, saved):
    """doc"""
    a, b = saved
    N = a.shape[0]
    s = (a * grad_out).sum(0)
    t = s / N
    dother = t * 2
    da = t * b + dother
    da[0] += 1
    return (da, dother)
'''
    body = ast.parse(source).body[0].body[2:-1]  # the statements emission records: no docstring,
    lowered = [_recorded(s) for s in body]  # unpacking of saved or return
    got = excerpts(lowered, ["da", "dother"], opaque={"N", "grad_out", "da", "dother"})
    assert got["da"] == "s = (a * grad_out).sum(0)\nt = s / N\nda = t * b + dother\nda[0] += 1"
    assert got["dother"] == "s = (a * grad_out).sum(0)\nt = s / N\ndother = t * 2"
