"""An ignore_index written as users write it: ``where(t[n] != -1, ..)``, ``where(t[n] == -100,
0, ..)``, against torch's F.cross_entropy(..., ignore_index=...) and the ``t[n] >= 0`` form.

The guard admits exactly the ignored value outside the axis: a -2 is refused in one line naming
the op and the input (on the CPU too, where the clamped read hides it from every kernel), and
an ignored row's gradient is exactly 0 (nothing reads index -1, which torch would wrap to the
last class). Found writing ops as users do (fourteenth session's open find (1)).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from derive.emit.generate import load_op, module_source
from derive.verify.check import load_module
from tests.modules.emitted import imported

CASES = Path(__file__).resolve().parents[1] / "cases"
DT = torch.float64
ONE = torch.tensor(1.0, dtype=DT)


def _inputs(ignored: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(7, 4, generator=torch.Generator().manual_seed(5), dtype=DT) * 3
    t = torch.tensor([0, ignored, 3, ignored, 1, 2, ignored])
    return x, t


def _run(module, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    loss, saved = module.forward(x, t)
    dx, dt = module.backward(ONE, saved)
    assert dt is None
    return loss, dx


def _torch(f, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = x.clone().requires_grad_()
    loss = f(leaf, t)
    (dx,) = torch.autograd.grad(loss, leaf)
    return loss.detach(), dx


def test_unequal_guard_is_cross_entropy_with_ignore_index(tmp_path: Path) -> None:
    module, _ = imported(CASES / "ignore_index_unequal.py", tmp_path)
    x, t = _inputs(-1)
    loss, dx = _run(module, x, t)
    want, want_dx = _torch(lambda a, b: F.cross_entropy(a, b, ignore_index=-1), x, t)
    torch.testing.assert_close(loss, want, rtol=1e-12, atol=0)
    torch.testing.assert_close(dx, want_dx, rtol=1e-12, atol=1e-16)
    assert torch.equal(dx[t == -1], torch.zeros_like(dx[t == -1]))
    # through autograd too: the Function's backward is the same
    leaf = x.clone().requires_grad_()
    module.Function.apply(leaf, t).backward()
    assert torch.equal(leaf.grad, dx)


def test_unequal_guard_agrees_with_the_at_least_zero_guard(tmp_path: Path) -> None:
    op = load_op(CASES / "ignore_index_unequal.py")
    written = [
        d.replace("t[n] != -1", "t[n] >= 0").replace("-1 != t[n]", "0 <= t[n]")
        for d in op.definitions
    ]
    other = dataclasses.replace(op, name="ignore_index_at_least_zero", definitions=written)
    path = tmp_path / f"{other.name}.py"
    path.write_text(module_source(other, "out"))
    x, t = _inputs(-1)
    mine, theirs = imported(CASES / "ignore_index_unequal.py", tmp_path)[0], load_module(path)
    for a, b in zip(_run(mine, x, t), _run(theirs, x, t), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    ("name", "bad", "message"),
    [
        (
            "ignore_index_unequal",
            -2,
            r"t has values in \[-2, 3\], outside \[0, C=4\) \(an entry of -1 is ignored\)$",
        ),
        ("ignore_index_unequal", 4, r"t has values in \[1, 4\], outside \[0, C=4\)"),
        (
            "focal_loss_ignore_index",
            -1,
            r"t has values in \[-1, 3\], outside \[0, C=4\) \(an entry of -100 is ignored\)$",
        ),
    ],
)
def test_a_value_the_guard_does_not_ignore_is_refused(name, bad, message, tmp_path: Path) -> None:
    """On the CPU the clamped read ``t.clamp(min=0)`` hides a -2 from every kernel (it reads
    class 0): the check runs before them, admitting only the ignored value."""
    module, _ = imported(CASES / f"{name}.py", tmp_path)
    x, t = _inputs(-100 if name.startswith("focal") else -1)
    t[0] = bad
    with pytest.raises(IndexError, match=f"^{name}: {message}"):
        module.forward(x, t)


def _focal(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    keep = t != -100
    logp = torch.log_softmax(x[keep], 1).gather(1, t[keep, None]).squeeze(1)
    return (-((1 - logp.exp()) ** 2) * logp).sum()


def test_equal_guard_is_a_focal_loss_with_ignore_index(tmp_path: Path) -> None:
    module, _ = imported(CASES / "focal_loss_ignore_index.py", tmp_path)
    x, t = _inputs(-100)
    loss, dx = _run(module, x, t)
    want, want_dx = _torch(_focal, x, t)
    torch.testing.assert_close(loss, want, rtol=1e-12, atol=0)
    torch.testing.assert_close(dx, want_dx, rtol=1e-12, atol=1e-16)
    assert torch.equal(dx[t == -100], torch.zeros_like(dx[t == -100]))


@pytest.mark.parametrize("guard", ["t[n] == -100", "t[n] < 0"])
def test_a_guarded_focal_loss_is_finite_where_the_unguarded_one_is(guard, tmp_path: Path) -> None:
    """Under a guard the backward kept ``S exp(m - x[t])`` inside the where() and the product
    that cancels it, ``(delta(c, t) - p) e``, outside: NaN at logits of +-1e4 where the
    unguarded focal loss (tests/cases/focal_loss_by_hand.py) and torch are finite. The guard
    now goes outward first where that cancels an exp (``simplify._guards_hoisted``)."""
    op = load_op(CASES / "focal_loss_ignore_index.py")
    written = [d.replace("t[n] == -100", guard) for d in op.definitions]
    path = tmp_path / f"{op.name}.py"
    path.write_text(module_source(dataclasses.replace(op, definitions=written), "out"))
    x = torch.tensor([[1e4, -1e4, 0.0, 5.0], [0.0, 1.0, 2.0, 3.0], [-1e4, 1e4, 0.0, 0.0]], dtype=DT)
    t = torch.tensor([1, 2, -100])
    loss, dx = _run(load_module(path), x, t)
    want, want_dx = _torch(_focal, x, t)
    torch.testing.assert_close(loss, want, rtol=1e-12, atol=0)
    torch.testing.assert_close(dx, want_dx, rtol=1e-12, atol=1e-16)
