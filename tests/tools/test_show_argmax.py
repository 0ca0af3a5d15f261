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


def test_a_call_named_for_the_backward_is_shown_with_the_forward() -> None:
    """gelu_tanh's backward has a step ``dout_tanh0 (intermediate out_tanh0)``: the tanh the
    derivation names to compute once (derive/symbolic/saving.py), which no definition of the
    op file names, so show said nowhere what it was (found by probing)."""
    text = render_text(explain_file(OPS / "gelu_tanh.py"), width=100)
    forward, backward = text.split("\nBackward", 1)
    assert "intermediate out_tanh0" in backward
    assert "Named for the backward" in forward and "out_tanh0[batch] = tanh" in forward
    assert "Named for the backward" not in render_text(explain_file(OPS / "tanh.py"), width=100)
