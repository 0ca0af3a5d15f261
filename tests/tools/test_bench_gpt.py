"""bench/gpt.py: the GPT step's variants are checked against autograd before they are timed."""

from __future__ import annotations

import torch

from bench.aten_calls import _decomposed_step
from bench.gpt import GPTSize, bench_size, check, make_step, problem

TINY = GPTSize("tiny", batch=4, block=8, n_embd=16, n_layer=1, n_head=2)


def test_the_generated_step_updates_as_autograd_in_float64():
    assert check("G", TINY, "cpu") <= 1e-10


def test_a_tiny_size_is_checked_then_timed():
    rows = bench_size(TINY, ["A", "G"], rounds=2, device="cpu", block_s=0.001)
    assert rows["A"]["ratio"] == 1.0
    assert not rows["G"]["wrong"] and rows["G"]["ms"] > 0 and rows["G"]["q1"] <= rows["G"]["q3"]


def test_the_decomposed_step_that_aten_calls_counts_updates_as_autograd():
    # bench.aten_calls's D: autograd through bench.decomposed's GPT, the same model written out
    config, params, batches = problem(TINY, torch.float64, "cpu")
    one = torch.ones((), dtype=torch.float64)
    a = {k: v.clone() for k, v in params.items()}
    d = {k: v.clone() for k, v in params.items()}
    make_step("A", config)(a, *batches[0], one)
    _decomposed_step(config)(d, *batches[0], one)
    moved = max((a[k] - params[k]).abs().max().item() for k in params)
    apart = max((a[k] - d[k]).abs().max().item() for k in params)
    assert moved > 0 and apart <= 1e-10 * moved
