"""show names where a backward's ``<max>_argmax`` comes from (issue 24): max_pool2d's dx reads
out_argmax, which no definition of the op file defines. cross_entropy's dlogits read
logit_maxes_argmax until its shift was proven unseen (derive/symbolic/shifts.py): now it reads
none, and none is shown."""

from __future__ import annotations

from pathlib import Path

from derive.explain.show import explain_file, render_text

OPS = Path(__file__).resolve().parents[2] / "ops"


def test_the_argmax_a_backward_reads_is_shown_with_the_forward() -> None:
    text = render_text(explain_file(OPS / "max_pool2d.py"), width=100)
    forward, backward = text.split("\nBackward", 1)
    assert "out_argmax" in backward
    assert "Saved by the forward" in forward
    assert "out_argmax[n, c, i, j] = argmax(x[n, c, i*stride + p, j*stride + q]" in forward


def test_an_unseen_shift_shows_no_argmax() -> None:
    text = render_text(explain_file(OPS / "cross_entropy.py"), width=100)
    assert "logit_maxes_argmax" not in text and "Saved by the forward" not in text


def test_an_op_without_a_max_shows_no_such_section() -> None:
    assert "Saved by the forward" not in render_text(explain_file(OPS / "tanh.py"), width=100)


def test_a_call_named_for_the_backward_is_shown_with_the_forward() -> None:
    """gelu_tanh's backward has a step ``dout_sigmoid0 (intermediate out_sigmoid0)``: the
    sigmoid (its 1 + tanh(u) read as 2 sigmoid(2u)) the derivation names to compute once
    (derive/symbolic/saving.py), which no definition of the op file names, so show said
    nowhere what it was (found by probing, when it was a tanh)."""
    text = render_text(explain_file(OPS / "gelu_tanh.py"), width=100)
    forward, backward = text.split("\nBackward", 1)
    assert "intermediate out_sigmoid0" in backward
    assert "Named for the backward" in forward and "out_sigmoid0[batch] = sigmoid" in forward
    assert "Named for the backward" not in render_text(explain_file(OPS / "tanh.py"), width=100)
