"""show names where a backward's ``<max>_argmax`` comes from (issue 24): cross_entropy's
simplified dlogits reads logit_maxes_argmax, which no definition of the op file defines."""

from __future__ import annotations

from pathlib import Path

from derive.explain.show import explain_file, render_text

OPS = Path(__file__).resolve().parents[2] / "ops"


def test_the_argmax_a_backward_reads_is_shown_with_the_forward() -> None:
    text = render_text(explain_file(OPS / "cross_entropy.py"), width=100)
    forward, backward = text.split("\nBackward", 1)
    assert "logit_maxes_argmax" in backward
    assert "Saved by the forward" in forward
    assert "logit_maxes_argmax[n] = argmax(logits[n, c], c)" in forward


def test_an_op_without_a_max_shows_no_such_section() -> None:
    assert "Saved by the forward" not in render_text(explain_file(OPS / "tanh.py"), width=100)
