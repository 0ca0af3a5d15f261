"""bench/ops.py: every row of the peers' table is checked against autograd before it is timed.

The fast test runs every row at a tiny size, one round, no torch.compile, no JAX and no
tensorgrad (seconds); the slow one compiles AC and GC (and runs J and T where JAX and
tensorgrad are installed) on one tiny row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

import pytest
import torch

from bench.op_cases import cases
from bench.op_run import VARIANTS, OpsConfig, chained, run_row
from bench.ops import _options, main

FAST = ["--tiny", "--rounds", "1", "--block-s", "0.001", "--threads", "1"]


@pytest.fixture
def restore_threads():
    """``--threads`` pins the whole process: give the next tests their cores back."""
    threads = torch.get_num_threads()
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    yield
    torch.set_num_threads(threads)
    if cores is not None:
        os.sched_setaffinity(0, cores)


def flipped(case):
    """The generated backward with its gradients negated: a WRONG variant for every row."""
    run_generated = chained(case.generated)

    def prepare(inputs):
        run = run_generated(inputs)
        return lambda: (lambda out, grads: (out, tuple(-g for g in grads)))(*run())

    return prepare


def _table(text: str) -> list[list[str]]:
    """The ratio table's rows, split into cells (the first table of the report)."""
    block = text[text.index("| fwd+bwd") :].split("\n\n")[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()]


def test_every_row_and_column_and_a_wrong_variant(tmp_path, monkeypatch, restore_threads):
    monkeypatch.setitem(sys.modules, "bench.jax_peer", None)  # as where JAX is not installed
    monkeypatch.setitem(sys.modules, "bench.tensorgrad_peer", None)  # and tensorgrad
    argv = [*FAST, "--no-compile", "--out", str(tmp_path)]
    assert main(argv, extra={"W": flipped}) == 0

    text = (tmp_path / "ops.md").read_text()
    assert "pinned to 1 core(s): torch.set_num_threads(1)" in text
    assert "J column skipped: this python cannot import JAX" in text
    assert "T column skipped: this python cannot import tensorgrad" in text
    head, _, *rows = _table(text)
    assert head[2:] == [*(VARIANTS[n] for n in VARIANTS if n != "A"), "W", "peak G / A"]
    assert [r[0] for r in rows] == [c.title for c in cases(tiny=True)]
    for row in rows:
        fused, ac, g, gc, j, t, w, peak = row[2:]
        assert float(row[1]) > 0 and float(g.split()[0]) > 0 and " / " in peak, row
        assert fused.split()[-2].replace(".", "").isdigit(), row  # "<label> 0.83 (0.80-0.86)"
        assert ac == gc == "skipped (--no-compile)" and j.startswith("skipped (no JAX"), row
        assert t.startswith("skipped (no tensorgrad"), row
        assert w.startswith("WRONG (float64 diff"), row

    data = json.loads((tmp_path / "ops.json").read_text())
    for row in data["rows"]:
        out = row["outcomes"]
        assert [out[n]["status"] for n in ("A", "F", "G", "W")] == ["ok", "ok", "ok", "wrong"]
        assert out["G"]["diff"]["float64"] <= 1e-10 and out["F"]["diff"]["float64"] <= 1e-10
        assert out["W"]["ratio"] is None and out["W"]["peak_bytes"] is None  # not timed
        assert out["W"]["diff"]["float64"] > 1.0  # -g against g: 2|g| / |g|


def test_bad_options_exit_2(tmp_path, capsys):
    assert main(["--rows", "huge", "--out", str(tmp_path)]) == 2
    assert main(["--variants", "A,Z", "--out", str(tmp_path)]) == 2
    both = ["--compile-mode", "max-autotune", "--compile-options", "cpp_wrapper=true"]
    assert main([*both, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: unknown row(s) ['huge']") and "unknown variant" in err[1]
    assert "--compile-mode and --compile-options" in err[2]


def test_compile_options_are_python_values():
    assert _options("cpp_wrapper=true, freezing=False,threads=2,name=abc") == {
        "cpp_wrapper": True,
        "freezing": False,
        "threads": 2,
        "name": "abc",
    }
    with pytest.raises(argparse.ArgumentTypeError, match="'cpp_wrapper' is not KEY=VALUE"):
        _options("cpp_wrapper")


@pytest.mark.slow
def test_compiled_and_jax_columns_agree_on_a_tiny_row(tmp_path, restore_threads):
    assert main([*FAST, "--rows", "layernorm-gpt", "--no-memory", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "ops.json").read_text())["rows"][0]["outcomes"]
    for name in ("AC", "GC"):
        assert out[name]["status"] == "ok" and out[name]["diff"]["float64"] <= 1e-10, out[name]
    assert out["J"]["status"] == ("ok" if "jax" in sys.modules else "skipped"), out["J"]
    assert out["T"]["status"] == ("ok" if "tensorgrad" in sys.modules else "skipped"), out["T"]


def test_a_peer_without_a_program_for_a_row_is_skipped_there():
    """The T column asks the peer for each row's program; a row it has none for is skipped
    with that said, the others checked against A (a stub peer: the generated code, flipped
    on one row, where tensorgrad is not installed)."""
    from types import SimpleNamespace

    def program(key):
        if key.startswith("gpt"):
            return None
        case = next(c for c in cases(tiny=True) if c.key == key)
        return flipped(case) if key == "softmax" else chained(case.generated)

    peer = SimpleNamespace(prepare=program)
    config = OpsConfig(rounds=1, block_s=0.001, memory=False)
    for key, want in (("gpt-makemore", "skipped"), ("layernorm-gpt", "ok"), ("softmax", "wrong")):
        case = next(c for c in cases(tiny=True) if c.key == key)
        row = run_row(case, ["A", "T"], None, config, tensorgrad_peer=peer)
        assert row.outcomes["T"].status == want, (key, row.outcomes["T"])
    assert row.outcomes["T"].ratio is None  # the wrong one is not timed
    gpt = run_row(cases(tiny=True)[0], ["A", "T"], None, config, tensorgrad_peer=peer)
    assert gpt.outcomes["T"].note == "not written in tensorgrad"


def test_a_reference_that_raises_times_nothing():
    def boom(x):
        raise RuntimeError("boom")

    case = replace(next(c for c in cases(tiny=True) if c.key == "softmax"), decomposed=boom)
    row = run_row(case, ["A", "G"], None, OpsConfig(rounds=1, block_s=0.001))
    assert [o.status for o in row.outcomes.values()] == ["error", "error"] and not row.rounds
    assert "A raised RuntimeError: boom" in row.outcomes["G"].note
