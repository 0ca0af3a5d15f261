"""The check stage: generated modules against an independent evaluation of their definitions.

Each file in tests/cases/ is a case found by trying the tool (issue 9: silently transposed
contractions, invalid Python for picks from intermediates, a refused softmax pick) or one that
covers the language (every function; log/sqrt drawn in their domain). The negative controls
show that a wrong forward and a wrong backward are both caught, each in one line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from derive.emit.generate import load_op
from derive.errors import CheckFailed
from derive.verify.check import check_module
from tests.modules.emitted import emitted

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((ROOT / "tests" / "cases").glob("*.py"))
CATALOGUE = sorted((ROOT / "ops").glob("*.py"))


def _module(op_file: Path, tmp_path: Path, edit=None) -> tuple[Path, object]:
    # an edit is written against the text generate writes; a check needs only the program
    path, op = emitted(op_file, tmp_path, formatted=edit is not None)
    if edit is not None:
        text = path.read_text()
        changed = edit(text)
        assert changed != text, "the edit must change the module"
        path.write_text(changed)
    return path, op


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_case_derives_a_verified_module(case: Path, tmp_path: Path) -> None:
    path, op = _module(case, tmp_path)
    assert check_module(path, op, seeds=2).startswith(f"checked {op.name}: forward matches")


@pytest.mark.parametrize("op_file", CATALOGUE, ids=lambda p: p.stem)
def test_catalogue_agrees_with_its_definitions(op_file: Path, tmp_path: Path) -> None:
    """The module in generated/ (test_regenerate holds it to a fresh derivation), not derived
    again here."""
    op = load_op(op_file)
    path = tmp_path / f"{op.name}.py"
    shutil.copyfile(ROOT / "generated" / f"{op.name}.py", path)
    report = check_module(path, op, seeds=1)
    assert "gradcheck passed" in report


def test_finite_differences_are_not_swamped_by_large_outputs(tmp_path: Path) -> None:
    # outputs of ~e^16 beside gradients of order 1: summing the whole output before differencing
    # read eps * sum|out| / h ~ 1e-3 of rounding noise into every entry (relative 9.7e-5 > 1e-6)
    op_file = ROOT / "tests" / "regressions" / "exception_valueerror_s90141.py"
    path, op = _module(op_file, tmp_path)
    assert "gradcheck passed" in check_module(path, op, seeds=1)


def test_wrong_forward_is_caught(tmp_path: Path) -> None:
    # the lowering's old bug, put back by hand: with I == J it has the right shape
    path, op = _module(
        ROOT / "tests" / "cases" / "contraction_names.py",
        tmp_path,
        lambda t: t.replace("out = x.T @ z", "out = z.T @ x"),
    )
    with pytest.raises(CheckFailed, match="op 'contraction_names': forward "):
        for seed in range(4):  # some seed draws I == J (same shape, wrong values)
            check_module(path, op, seeds=seed + 1)


def test_wrong_backward_names_the_input(tmp_path: Path) -> None:
    path, op = _module(
        ROOT / "ops" / "linear.py",
        tmp_path,
        lambda t: t.replace("dW if needs[1] else None", "dW * 1.001 if needs[1] else None"),
    )
    with pytest.raises(CheckFailed) as info:
        check_module(path, op, seeds=1)
    message = str(info.value)
    assert "gradient of W differs from autograd" in message and "\n" not in message


def test_check_command_reports_each_input_and_exits_nonzero_on_failure(tmp_path: Path) -> None:
    good = subprocess.run(
        [sys.executable, "-m", "derive", "check", "relu", "--seeds", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert good.returncode == 0, good.stderr
    assert "dx" in good.stdout and "vs finite differences" in good.stdout
    unknown = subprocess.run(
        [sys.executable, "-m", "derive", "check", "no_such_op"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr


def test_finite_differences_allow_for_the_rounding_of_a_large_loss(tmp_path: Path) -> None:
    """A 0-d loss of ~1e3 (a gated recurrence's squared sum, seed 0): every nudge reaches it,
    so central differences carry eps * |loss| / h ~ 5e-7 of rounding noise, and a gradient
    entry near 0, judged against max(1, |reference|), read 1.4e-6 > 1e-6: a correct module
    failed (found by probing). The comparison now allows for that noise; autograd's is
    unchanged (1e-10)."""
    (tmp_path / "op").mkdir()
    op_file = tmp_path / "op" / "gated_sq.py"
    op_file.write_text(
        "from derive import Op\n\n"
        "OP = Op(\n"
        '    name="gated_sq",\n'
        '    inputs=["x[N, T]", "la[N, T]"],\n'
        '    ranges={"t": "T"},\n'
        "    definitions=[\n"
        '        "c[n, t] = Sum(where(s <= t, la[n, s], 0), s)",\n'
        '        "h[n, t] = Sum(where(s <= t, exp(c[n, t] - c[n, s]) * x[n, s], 0), s)",\n'
        '        "out = Sum(h[n, t]**2, n, t)",\n'
        "    ],\n"
        ")\n"
    )
    path, op = _module(op_file, tmp_path)
    assert "gradcheck passed" in check_module(path, op, seeds=1)


def test_a_length_compared_with_an_index_is_drawn_from_one(tmp_path: Path) -> None:
    """Key-padding attention, ``where(j < lens[b], s, -inf)``: lens indexes nothing, so it was
    drawn in [0, 3), and a length of 0 masks a whole row (0 / 0, as in torch) at every seed:
    "no draw gives finite values", and generate --check refused a correct module (found by
    probing). Such a count is drawn from 1 when no draw from 0 is finite."""
    (tmp_path / "op").mkdir()
    op_file = tmp_path / "op" / "key_padding.py"
    op_file.write_text(
        "from derive import Op\n\n"
        "OP = Op(\n"
        '    name="key_padding",\n'
        '    inputs=["q[B, T, D]", "k[B, T, D]", "lens[B]: int64"],\n'
        "    definitions=[\n"
        '        "s[b, i, j] = where(j < lens[b], Sum(q[b, i, d] * k[b, j, d], d), -inf)",\n'
        '        "m[b, i] = Max(s[b, i, j], j)",\n'
        '        "e[b, i, j] = exp(s[b, i, j] - m[b, i])",\n'
        '        "out[b, i, j] = e[b, i, j] / Sum(e[b, i, j2], j2)",\n'
        "    ],\n"
        ")\n"
    )
    path, op = _module(op_file, tmp_path)
    assert "gradcheck passed" in check_module(path, op, seeds=2)


def test_a_partner_index_that_may_read_a_masked_diagonal_is_checked_at_another_seed(
    tmp_path: Path,
) -> None:
    """NT-Xent: the diagonal masked with -inf, each row's partner ``pos[i]`` an index. A draw
    with ``pos[i] = i`` reads the mask and makes the loss inf, and the first seed had one at
    every draw: "no draw gives finite values", and generate --check refused a correct module
    (found by probing). The next seeds are drawn too."""
    (tmp_path / "op").mkdir()
    op_file = tmp_path / "op" / "ntxent.py"
    op_file.write_text(
        "from derive import Op\n\n"
        "OP = Op(\n"
        '    name="ntxent",\n'
        '    inputs=["z[M, D]", "pos[M]: int64"],\n'
        '    params={"tau": 0.5},\n'
        "    definitions=[\n"
        '        "sim[i, j] = where(i != j, Sum(z[i, d] * z[j, d], d) / tau, -inf)",\n'
        '        "m[i] = Max(sim[i, j], j)",\n'
        '        "lse[i] = m[i] + log(Sum(exp(sim[i, j] - m[i]), j))",\n'
        '        "loss = Sum(lse[i] - sim[i, pos[i]], i) / M",\n'
        "    ],\n"
        ")\n"
    )
    path, op = _module(op_file, tmp_path)
    assert "gradcheck passed" in check_module(path, op, seeds=1)


def test_gradcheck_allows_for_the_rounding_of_a_large_output(tmp_path: Path) -> None:
    """A Gaussian NLL with its variance clamped at eps = 1e-6: every negative draw of var makes
    a loss of ~1e5, whose rounding over gradcheck's step (1e-6) is 1.5e-5, past its default
    atol of 1e-5, and ``generate --check`` refused a correct module (found by probing). The
    tolerance grows with the output; the rows still hold each gradient to autograd at 1e-10."""
    (tmp_path / "op").mkdir()
    op_file = tmp_path / "op" / "gaussian_nll.py"
    op_file.write_text(
        "from derive import Op\n\n"
        "OP = Op(\n"
        '    name="gaussian_nll",\n'
        '    inputs=["inp[N, D]", "target[N, D]", "var[N, D]"],\n'
        '    params={"eps": 1e-6},\n'
        "    definitions=[\n"
        '        "v[n, d] = maximum(var[n, d], eps)",\n'
        '        "loss = Sum(0.5 * (log(v[n, d]) + (inp[n, d] - target[n, d])**2 / v[n, d]),'
        ' n, d) / (N * D)",\n'
        "    ],\n"
        ")\n"
    )
    path, op = _module(op_file, tmp_path)
    assert "gradcheck passed" in check_module(path, op, seeds=1)


def test_a_failing_gradcheck_names_the_input(tmp_path: Path) -> None:
    """What gradcheck found, in one line naming the gradient: it said only "fails" before."""
    from derive.language import parse
    from derive.verify.check import _gradcheck, load_module

    path, op = _module(
        ROOT / "ops" / "linear.py",
        tmp_path,
        lambda t: t.replace("dW if needs[1] else None", "dW * 1.01 if needs[1] else None"),
    )
    failed = _gradcheck(load_module(path), parse(op), 0)
    assert failed is not None and failed.startswith("the gradient of W: Jacobian mismatch")
    assert "\n" not in failed
