"""Progress on a long derivation (derive/progress.py): quiet at first, then one line a stage."""

from __future__ import annotations

import io

from derive import Op
from derive.emit.generate import emit
from derive.progress import Stages


def test_stages_stay_quiet_until_the_op_has_run_a_while() -> None:
    now = [100.0]
    out = io.StringIO()
    stages = Stages("attn", out=out, quiet_s=5.0, clock=lambda: now[0])
    stages("the tangents")
    assert out.getvalue() == ""
    now[0] = 112.4
    stages("the double backward, lowering")
    assert out.getvalue() == "  attn: the double backward, lowering (12 s so far)\n"


def test_emit_reports_every_stage_in_order() -> None:
    heard: list[str] = []
    op = Op("t", ["x[N]", "w[N]"], ["out[n] = tanh(x[n]) * w[n]"])
    emit(op, "out", heard.append)
    assert heard[:2] == [
        "simplifying the adjoint of x (1 of 2)",
        "simplifying the adjoint of w (2 of 2)",
    ]
    assert heard[2:4] == ["the backward, lowering", "the double backward, deriving"]
    assert any(h.startswith("the double backward, simplifying the adjoint of") for h in heard)
    assert heard[-2:] == ["the double backward, lowering", "the tangents"]
