"""bench/gpt.py: the GPT step's variants are checked against autograd before they are timed."""

from __future__ import annotations

from bench.gpt import GPTSize, bench_size, check

TINY = GPTSize("tiny", batch=4, block=8, n_embd=16, n_layer=1, n_head=2)


def test_the_generated_step_updates_as_autograd_in_float64():
    assert check("G", TINY, "cpu") <= 1e-10


def test_a_tiny_size_is_checked_then_timed():
    rows = bench_size(TINY, ["A", "G"], rounds=2, device="cpu", block_s=0.001)
    assert rows["A"]["ratio"] == 1.0
    assert not rows["G"]["wrong"] and rows["G"]["ms"] > 0 and rows["G"]["q1"] <= rows["G"]["q3"]
