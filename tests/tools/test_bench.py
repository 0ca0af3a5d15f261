"""Smoke tests of the benchmark harness (``python -m bench``): no timing assertions.

What must hold whatever the machine: every variant passes the float64 check against A, the
report and the JSON have one row per variant and one column per size, and a variant that
computes a wrong update is reported as WRONG and never timed.
"""

from __future__ import annotations

import json

import pytest
import torch

from bench.__main__ import main
from bench.floor import gemm_shapes, traffic_elements
from bench.problem import parse_size
from bench.report import markdown
from bench.runner import BenchConfig, run
from bench.variants import Variant, generated_step

TINY = "8x16"  # batch 8, hidden 16: every code path, milliseconds per step


def flipped_step(params, X, Y, lr):
    """The generated step climbing instead of descending: the update a miscompile could make."""
    return generated_step(params, X, Y, -lr)


def nan_loss_step(params, X, Y, lr):
    """A right update with a NaN loss: the check compares losses too, and NaN never passes."""
    generated_step(params, X, Y, lr)
    return torch.tensor(float("nan"))


def _rows(table_text: str, heading: str) -> list[str]:
    """The markdown table rows under ``heading``."""
    section = table_text.split(heading, 1)[1].split("###", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]


def test_quick_run_reports_every_variant(tmp_path):
    """The quick run's code path (compiled GC included) at the tiny size, end to end."""
    json_path = tmp_path / "out.json"
    argv = ["--quick", "--sizes", TINY, "--rounds", "2", "--warmup", "1"]
    assert main([*argv, "--out", str(tmp_path), "--json", str(json_path), "--no-plot"]) == 0

    data = json.loads(json_path.read_text())
    assert [s["size"]["name"] for s in data["sizes"]] == [TINY]
    for size in data["sizes"]:
        assert size["recompiles_while_timing"] == 0
        variants = {v["name"]: v for v in size["variants"]}
        assert list(variants) == ["A", "B", "G", "GC"]
        for v in variants.values():
            assert v["status"] == "ok", v
            assert v["check"]["grad_diff"]["float64"] <= 1e-10
            assert len(v["timing"]["per_step_s"]) == 2
            assert v["ratio_to"]["A"]["median"] > 0
        assert variants["G"]["memory"]["saved_bytes"] > 0
        assert variants["GC"]["memory"]["peak_live_bytes"] is None  # n/a for compiled code
    assert data["graphs"]["GC"]["graphs"] >= 1
    assert data["generate"]["median_s"] > 0

    text = (tmp_path / "bench.md").read_text()
    headings = ("ratio to A", "ratio to B", "ratio to the floor F", "Check against A", "Memory")
    for heading in headings:
        rows = _rows(text, heading)
        assert [r.split(":")[0] for r in rows[1:]] == ["| A", "| B", "| G", "| GC"], heading
        assert rows[0] == f"| variant | {TINY} |"


def test_the_floor_is_the_steps_gemms_and_its_minimal_traffic():
    """Six products with the step's shapes and layouts, and each element-wise byte once: the
    floor at a size is timed in the same rounds as the variants, each variant's ratio to it kept
    (the numbers themselves are the benchmark's to report, not a test's to assert)."""
    B, K, H, V = 4096, 30, 4096, 27
    assert [s[:3] for s in gemm_shapes(B, H)] == [
        (B, K, H), (B, H, V), (H, B, V), (B, V, H), (K, B, H), (B, H, K)
    ]  # fmt: skip
    assert traffic_elements(B, H, n_params=1000) == 6 * B * H + 2 * B * V + 4 * B * K + 3000
    cfg = BenchConfig([parse_size("256x512")], ["A", "G"], rounds=3, warmup=1, generate_repeats=0)
    (size,) = run(cfg).sizes
    assert size.floor is not None and len(size.floor.per_step_s) == 3
    assert all(v.ratio_to["F"].median > 0 for v in size.variants)


def test_wrong_variant_is_reported_and_not_timed():
    wrong = Variant("W", "generated step, sign flipped", flipped_step, autograd=False)
    nan = Variant("N", "generated step, NaN loss", nan_loss_step, autograd=False)
    sizes = [parse_size(TINY), parse_size("4x8")]
    cfg = BenchConfig(sizes, ["A", "G"], rounds=2, warmup=1, generate_repeats=0)
    result = run(cfg, extra=[wrong, nan])
    for size in result.sizes:
        by_name = {v.name: v for v in size.variants}
        assert by_name["G"].status == "ok" and by_name["G"].timing is not None
        for bad in (by_name["W"], by_name["N"]):
            assert bad.status == "wrong"
            assert bad.timing is None and not bad.ratio_to and not bad.memory
        assert by_name["W"].check.grad_diff["float64"] > 1.0  # -g against g: 2|g|
    rows = _rows(markdown(result), "ratio to A")
    assert rows[0] == f"| variant | {TINY} | 4x8 |"
    assert [r.split(":")[0] for r in rows[1:]] == ["| A", "| G", "| W", "| N"]
    assert rows[-2].count("WRONG (float64: grad diff") == 2
    assert rows[-1].count("loss diff nan") == 2


def test_raising_variant_is_an_error_not_a_crash():
    def broken(params, X, Y, lr):
        raise RuntimeError("boom")

    cfg = BenchConfig([parse_size(TINY)], ["A"], rounds=1, warmup=1, generate_repeats=0)
    result = run(cfg, extra=[Variant("E", "raises", broken, autograd=False)])
    (err,) = [v for v in result.sizes[0].variants if v.name == "E"]
    assert err.status == "error" and "boom" in err.check.error and err.timing is None


def test_eager_variants_agree_in_float64_at_the_makemore_size():
    """The check's premise: A, B and G are the same step to float64 rounding."""
    cfg = BenchConfig(
        [parse_size("makemore")],
        ["A", "B", "G"],
        rounds=1,
        warmup=0,
        generate_repeats=0,
        memory=False,
    )
    for v in run(cfg).sizes[0].variants:
        assert v.status == "ok" and v.check.grad_diff["float64"] < 1e-12, v.check


@pytest.mark.parametrize("text", ["huge", "1x8", "8x"])
def test_bad_size_is_rejected(text):
    with pytest.raises(ValueError, match="unknown size"):
        parse_size(text)


@pytest.mark.parametrize("option", [["--sizes", "huge"], ["--variants", "A,Z"]])
def test_bad_option_exits_2(option, tmp_path, capsys):
    assert main([*option, "--out", str(tmp_path)]) == 2
    assert "unknown" in capsys.readouterr().err


def test_unknown_device_is_one_line(tmp_path, capsys):
    assert main(["--device", "foo", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == "error: --device 'foo' is not a device: choose cpu or cuda\n"


def test_last_line_names_the_plot_with_its_folder(tmp_path, capsys):
    out = tmp_path / "here"
    argv = ["--sizes", "4x8", "--variants", "A", "--rounds", "1", "--warmup", "0"]
    assert main([*argv, "--no-generate", "--no-compile", "--out", str(out)]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith(f"{out / 'bench.json'}, {out / 'bench.png'}"), last
    assert (out / "bench.png").stat().st_size > 1000


def test_a_report_never_replaces_a_file_no_run_wrote(tmp_path, capsys):
    # found by probing: --json names.txt replaced the data with a report, and --out a
    # folder's own bench.md; refused before any timing now, and a run's own reports replaced
    argv = ["--sizes", "4x8", "--variants", "A", "--rounds", "1", "--warmup", "0", "--no-plot"]
    argv += ["--no-generate", "--no-compile"]
    data = tmp_path / "names.txt"
    data.write_text("emma\nolivia\n")
    assert main([*argv, "--out", str(tmp_path / "a"), "--json", str(data)]) == 2
    assert data.read_text() == "emma\nolivia\n" and not (tmp_path / "a").exists()
    assert "names.txt exists and no benchmark run wrote it" in capsys.readouterr().err
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "bench.md").write_text("my notes\n")
    assert main([*argv, "--out", str(mine)]) == 2
    assert (mine / "bench.md").read_text() == "my notes\n"
    fresh = tmp_path / "fresh"
    assert main([*argv, "--out", str(fresh)]) == 0
    assert main([*argv, "--out", str(fresh)]) == 0  # its own reports, replaced
    (fresh / "bench.md").write_text("edited by hand\n")
    assert main([*argv, "--out", str(fresh)]) == 2  # changed since: the user's now


@pytest.mark.parametrize(
    "option",
    [
        ["--rounds", "0"],
        ["--rounds", "-3"],
        ["--warmup", "-2"],
        ["--threads", "0"],
        ["--sizes", "4x0"],
    ],
)
def test_a_bad_count_is_one_line_before_the_run(option, tmp_path, capsys):
    # found by probing: --rounds 0 became 10, -3 and --sizes 4x0 ended in tracebacks
    assert main([*option, "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: {option[0]}" if option[0] != "--sizes" else "error: unknown size"
    )
