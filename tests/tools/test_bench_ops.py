"""bench/ops.py: every row of the peers' table is checked against autograd before it is timed.

The fast test runs every row at a tiny size, one round, no torch.compile and no JAX (seconds);
the slow one compiles AC and GC (and runs J where JAX is installed) on one tiny row.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace

import pytest
import torch

from bench.op_cases import cases
from bench.op_run import VARIANTS, OpsConfig, chained, run_row
from bench.ops import main

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
    argv = [*FAST, "--no-compile", "--out", str(tmp_path)]
    assert main(argv, extra={"W": flipped}) == 0

    text = (tmp_path / "ops.md").read_text()
    assert "pinned to 1 core(s): torch.set_num_threads(1)" in text
    assert "J column skipped: this python cannot import JAX" in text
    head, _, *rows = _table(text)
    assert head[2:] == [*(VARIANTS[n] for n in VARIANTS if n != "A"), "W", "peak G / A"]
    assert [r[0] for r in rows] == [c.title for c in cases(tiny=True)]
    for row in rows:
        fused, ac, g, gc, j, w, peak = row[2:]
        assert float(row[1]) > 0 and float(g.split()[0]) > 0 and " / " in peak, row
        assert fused.split()[-2].replace(".", "").isdigit(), row  # "<label> 0.83 (0.80-0.86)"
        assert ac == gc == "skipped (--no-compile)" and j.startswith("skipped (no JAX"), row
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
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: unknown row(s) ['huge']") and "unknown variant" in err[1]


@pytest.mark.slow
def test_compiled_and_jax_columns_agree_on_a_tiny_row(tmp_path, restore_threads):
    assert main([*FAST, "--rows", "layernorm-gpt", "--no-memory", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "ops.json").read_text())["rows"][0]["outcomes"]
    for name in ("AC", "GC"):
        assert out[name]["status"] == "ok" and out[name]["diff"]["float64"] <= 1e-10, out[name]
    assert out["J"]["status"] == ("ok" if "jax" in sys.modules else "skipped"), out["J"]


def test_a_reference_that_raises_times_nothing():
    def boom(x):
        raise RuntimeError("boom")

    case = replace(next(c for c in cases(tiny=True) if c.key == "softmax"), decomposed=boom)
    row = run_row(case, ["A", "G"], None, OpsConfig(rounds=1, block_s=0.001))
    assert [o.status for o in row.outcomes.values()] == ["error", "error"] and not row.rounds
    assert "A raised RuntimeError: boom" in row.outcomes["G"].note
