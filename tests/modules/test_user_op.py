"""A user's own op, in their own folder, goes through derivation, emission and verification."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from derive import DerivationError, Op
from derive.language import parse
from derive.symbolic.derivation import derive
from derive.verify.check import load_module
from tests.op_table import SIGMOID

ROOT = Path(__file__).resolve().parents[2]


def _generate(tmp_path: Path, source: str, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "my_op.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "derive", "generate", "my_op.py", "--out", "out", *extra]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)


def test_user_op_end_to_end(tmp_path: Path) -> None:
    result = _generate(tmp_path, SIGMOID, "--check")
    assert result.returncode == 0, result.stderr
    assert "gradcheck passed" in result.stderr
    module = load_module(tmp_path / "out" / "sigmoid.py")
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    out, saved = module.forward(x)
    (dx,) = module.backward(torch.ones_like(out), saved)
    torch.sigmoid(x).sum().backward()
    assert (dx - x.grad).abs().max() <= 1e-12


def test_bad_op_file_gives_one_clear_line(tmp_path: Path) -> None:
    bad = SIGMOID.replace("x[n, m]))", "x[n, q]))")
    result = _generate(tmp_path, bad)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "op 'sigmoid'" in result.stderr and "index q" in result.stderr


def _op(*definitions: str, inputs=("x[N, M]",)) -> Op:
    return Op(name="bad", inputs=list(inputs), definitions=list(definitions))


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (_op("out[n, m] = x[n, q]"), "index q is neither on the left-hand side nor summed"),
        (_op("out[n] = x[n, m]"), "index m is neither"),
        (  # the Sum binds the left's n inside it: m is the index left over (found by probing)
            _op("out[n] = x[n, n] + Sum(x[n, m], n)", inputs=("x[N, N]",)),
            "Sum(x[n, m], n) sums over n, which the left-hand side names too",
        ),
        (_op("out[n, m] = y[n, m]"), "unknown tensor"),
        (_op("out[n, m] = foo(x[n, m])"), "unknown function foo"),
        (_op("out[n] = Sum(x[n, k] * w[k], k)", inputs=("x[N, D]", "w[M]")), "different sizes"),
        (_op("out[n, m] = x[n, m, m]"), "wrong number of indices"),
        (_op("out[n, m] = x[n + 1, m]"), "subscript"),
        (_op("out[n, m] = floor(x[n, m])"), "unknown function floor (known: abs, cos"),
        (
            _op("v = view(x, ..., M, 1)", "out[..., m] = v[..., m, 0]", inputs=("x[..., M]",)),
            "a view of x with '...' in it",
        ),
    ],
)
def test_derivation_errors_name_op_definition_and_problem(op: Op, message: str) -> None:
    with pytest.raises(DerivationError) as info:
        derive(parse(op))
    text = str(info.value)
    assert text.startswith("op 'bad'") and message in text


def test_generated_forward_rejects_bad_input() -> None:
    from generated import cross_entropy, embedding, linear

    with pytest.raises(ValueError, match=r"linear: W.shape\[0\] is 5, but D is 4"):
        linear.forward(torch.randn(3, 4), torch.randn(5, 2), torch.randn(2))
    with pytest.raises(TypeError, match="cross_entropy: targets must be an int64 tensor"):
        cross_entropy.forward(torch.randn(3, 4), torch.zeros(3))
    with pytest.raises(
        IndexError, match=r"embedding: idx has values in \[0, 9\], outside \[0, V=5\)"
    ):
        embedding.forward(torch.tensor([0, 9]), torch.randn(5, 2))
    with pytest.raises(
        TypeError, match="linear: W is torch.float32 on cpu, but x is torch.float64"
    ):
        linear.forward(torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 2), torch.randn(2))
    with pytest.raises(ValueError, match="linear: x must have 2 dimensions"):
        linear.forward(torch.randn(3), torch.randn(3, 2), torch.randn(2))


def test_function_apply_takes_params_in_the_order_declared(tmp_path: Path) -> None:
    """``params={"lo": ..., "hi": ...}``: ``Function.apply(x, lo, hi)``, as the op file lists
    them (and as ``F.hardtanh(x, min_val, max_val)``), never sorted by name."""
    from tests.modules.emitted import imported

    module, _ = imported("tests/cases/params_in_declared_order.py", tmp_path)
    x = torch.linspace(-2, 2, 9, dtype=torch.float64).reshape(3, 3)
    out = module.Function.apply(x, -0.5, 0.8)
    assert torch.equal(out, x.clamp(-0.5, 0.8))
    assert torch.equal(module.forward(x, lo=-0.5, hi=0.8)[0], out)


def test_params_defaulting_to_earlier_ones_resolve_in_order(tmp_path: Path) -> None:
    """c defaults to b, b to a: every entry point reads them resolved, Function.apply's
    binding too (it left c None, which torch.export refused; found probing)."""
    from tests.modules.emitted import imported

    module, _ = imported(ROOT / "tests/cases/param_defaults_chained.py", tmp_path)
    x = torch.randn(3, 11, dtype=torch.float64)
    assert module._bound(x)[1:] == (2, 2, 2)
    assert module._bound(x, 3)[1:] == (3, 3, 3)
    assert module._bound(x, 3, 1)[1:] == (3, 1, 1)
    window = x.unfold(1, 2, 2).sum(-1) * 2
    assert torch.equal(module.Function.apply(x), window)
    assert torch.equal(module.forward(x)[0], window)
    assert torch.equal(module.Function.apply(x, 2, 2, 2), window)

    class Model(torch.nn.Module):
        def forward(self, t):
            return module.Function.apply(t)

    program = torch.export.export(Model(), (x,))
    assert torch.equal(program.module()(x), window)
