"""Issue 11 for train/: nothing a user has is overwritten, bad options and damaged checkpoints
are one clear line before any training, and what a run says about itself is true.

Small word lists and a small MLP, as in test_mlp.py; nothing here reads or writes runs/.
"""

from __future__ import annotations

import argparse
import io
import math
from pathlib import Path

import pytest
import torch

from tests.training.helpers import MLP_SMALL as SMALL
from tests.training.helpers import REPO, load, train_cli, write_words
from train import data, engine, preflight
from train.cli import main
from train.models import mlp
from train.models.mlp import MLPConfig
from train.models.mlp_net import step_bytes
from train.progress import Progress
from train.report import plot_losses

STEPS = 120


@pytest.fixture(scope="module")
def words(tmp_path_factory) -> Path:
    return write_words(tmp_path_factory.mktemp("data") / "words.txt")


@pytest.fixture(scope="module")
def finished(words, tmp_path_factory) -> dict:
    """One finished small run: its folder, stdout and checkpoint."""
    out = tmp_path_factory.mktemp("finished")
    code, stdout, stderr = train_cli(
        "--data", str(words), "--steps", str(STEPS), *SMALL, "--out", str(out)
    )
    assert code == 0, stderr
    return {"out": out, "stdout": stdout, "ckpt": out / "checkpoint.pt"}


def _short(words: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return train_cli("--data", str(words), "--steps", "40", *SMALL, "--out", str(out), *extra)


# --- nothing a user has is overwritten ---------------------------------------------------------


def test_overwrite_never_replaces_the_data_file(words, tmp_path):
    before = words.read_bytes()
    code, _, stderr = _short(words, tmp_path, "--checkpoint", str(words), "--overwrite")
    assert code == 2 and words.read_bytes() == before
    assert f"--data {words} is also --checkpoint {words}" in stderr and "refusing" in stderr
    assert "already holds" not in stderr  # the old message said so, untruly


def test_overwrite_never_replaces_an_arbitrary_file(words, tmp_path):
    mine = tmp_path / "notes.pt"
    mine.write_bytes(b"my own notes")
    for extra in ([], ["--overwrite"]):
        code, _, stderr = _short(words, tmp_path, "--checkpoint", str(mine), *extra)
        assert code == 2 and mine.read_bytes() == b"my own notes", stderr
        assert "is not a backgen training checkpoint" in stderr


def test_overwrite_replaces_a_checkpoint(words, finished, tmp_path):
    """The positive control: --overwrite still starts over an existing run."""
    out = tmp_path / "again"
    assert _short(words, out)[0] == 0
    code, _, stderr = _short(words, out, "--overwrite", "--steps", "20")
    assert code == 0, stderr
    assert load(out / "checkpoint.pt")["step"] == 20


def test_a_new_run_never_replaces_an_earlier_runs_report(words, tmp_path):
    # found by probing: with its --checkpoint elsewhere, a new run replaced the folder's
    # metrics.json and loss.png while the folder's checkpoint stayed the earlier run's
    out = tmp_path / "run"
    assert _short(words, out, "--steps", "20")[0] == 0
    before = (out / "metrics.json").read_bytes()
    code, _, stderr = _short(words, out, "--checkpoint", str(tmp_path / "other.pt"))
    assert code == 2 and (out / "metrics.json").read_bytes() == before
    assert "is an earlier run's report" in stderr and "--overwrite" in stderr
    assert not (tmp_path / "other.pt").exists()


def test_metrics_never_replace_a_user_file(words, tmp_path):
    code, _, stderr = _short(words, tmp_path / "run", "--metrics", str(words))
    assert code == 2 and "refusing" in stderr and str(words) in stderr
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_out_naming_a_file_is_refused_before_training(words, tmp_path, monkeypatch):
    taken = tmp_path / "taken"
    taken.write_text("keep\n")
    monkeypatch.setitem(mlp.STEPS, "generated", None)  # any step taken would crash
    code, _, stderr = _short(words, taken)
    assert (
        code == 2
        and stderr.strip() == f"error: --out {taken} is a file; --out names the run's folder"
    )
    assert taken.read_text() == "keep\n"


def test_resume_and_overwrite_together_are_refused(finished):
    code, _, stderr = train_cli("--resume", "--overwrite", "--out", str(finished["out"]))
    assert code == 2 and "--resume" in stderr and "--overwrite" in stderr
    assert load(finished["ckpt"])["step"] == STEPS


# --- bad options and damaged checkpoints: one line ---------------------------------------------


def test_seed_beyond_64_bits_is_one_clear_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--seed", str(2**64), "--steps", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --seed: must be in [0, 2**64 - 1]" in err and "Traceback" not in err


def test_largest_64_bit_seed_trains_and_samples(words, tmp_path):
    code, stdout, stderr = _short(words, tmp_path, "--seed", str(2**64 - 1), "--steps", "5")
    assert code == 0 and "samples:" in stdout, stderr


def test_a_parameter_of_the_wrong_shape_is_named(finished, tmp_path):
    payload = load(finished["ckpt"])
    payload["params"]["W1"] = payload["params"]["W1"][:, :5].clone()
    bad = tmp_path / "bad.pt"
    torch.save(payload, bad)
    code, _, stderr = train_cli("--resume", "--checkpoint", str(bad), "--out", str(tmp_path))
    assert code == 2
    assert f"parameter W1 has shape {(12, 5)}, but its config needs {(12, 16)}" in stderr


def test_a_byte_flipped_checkpoint_is_refused(finished, tmp_path):
    """Flip one byte inside the stored loss history: torch still loads it, the checksum not."""
    raw = bytearray(finished["ckpt"].read_bytes())
    losses = load(finished["ckpt"])["losses"].numpy().tobytes()
    at = raw.find(losses) + len(losses) // 2
    assert at > len(losses) // 2
    raw[at] ^= 0x10
    bad = tmp_path / "checkpoint.pt"
    bad.write_bytes(bytes(raw))
    assert not torch.equal(load(bad)["losses"], load(finished["ckpt"])["losses"])  # loads
    code, _, stderr = train_cli("--resume", "--out", str(tmp_path), "--steps", str(STEPS + 10))
    assert code == 2
    assert (
        stderr.strip()
        == f"error: checkpoint {bad} is damaged: its contents do not match its sha256 checksum"
    )


def test_a_huge_batch_is_refused_before_training(words, tmp_path, monkeypatch):
    monkeypatch.setattr(preflight, "available_bytes", lambda: 4 * 2**30)
    monkeypatch.setitem(mlp.STEPS, "generated", None)  # any step taken would crash
    code, _, stderr = _short(words, tmp_path, "--batch-size", "10000000")
    assert code == 2 and "--batch-size 10000000 needs about" in stderr
    assert "more than the 4.0 GiB of memory available" in stderr
    assert not (tmp_path / "checkpoint.pt").exists()


def test_the_memory_estimate_covers_a_measured_step():
    """The estimate is an upper bound of a step's measured 6.9 KB an example (see its doc)."""
    shape = mlp.shape(MLPConfig(), 27)  # the seed's sizes
    assert step_bytes(shape, 1000, "float32", 1) >= 1000 * 6900
    assert step_bytes(shape, 32, "float32", 182_625) < 2**30  # the default run fits


# --- what a run says is true --------------------------------------------------------------------


def test_diverging_after_overwrite_does_not_claim_the_old_checkpoint(words, tmp_path):
    out = tmp_path / "run"
    assert _short(words, out)[0] == 0
    code, _, stderr = _short(
        words, out, "--overwrite", "--lr", "1e30", "--checkpoint-every", "1000"
    )
    assert code == 1 and "training diverged" in stderr
    assert "Kept the last good checkpoint" not in stderr
    ckpt = out / "checkpoint.pt"
    assert f"No checkpoint of this run was written before that; {ckpt} still holds the" in stderr
    assert load(ckpt)["step"] == 40


def test_no_checkpoint_holds_non_finite_batchnorm_statistics(words):
    """Finite parameters whose batchnorm statistics overflow float32 are not saved."""
    ds = data.load_contexts(words, block_size=3)
    run = engine.new_run(mlp.SPEC, MLPConfig(n_embd=4, n_hidden=16), ds, argparse.Namespace())
    run.params["W1"].fill_(1e30)  # finite; the variance of hprebn is ~1e60, inf in float32
    with pytest.raises(engine.Diverged, match="batchnorm statistics are not finite"):
        engine.snapshot(mlp.SPEC, run)


def test_no_checkpoint_holds_a_non_finite_optimizer_state(words):
    ds = data.load_contexts(words, block_size=3)
    config = MLPConfig(n_embd=4, n_hidden=16, optimizer="adamw")
    run = engine.new_run(mlp.SPEC, config, ds, argparse.Namespace())
    X, Y = ds.X_train[:16], ds.Y_train[:16]
    engine.apply_update(run, mlp.generated_step(run.params, X, Y)[1])
    state = run.optimizer.state[run.params["W2"]]
    state["exp_avg_sq"][0, 0] = float("inf")
    with pytest.raises(engine.Diverged, match="optimizer state is not finite"):
        engine.snapshot(mlp.SPEC, run, periodic=True)


def test_progress_shows_a_labelled_smoothed_loss():
    stream = io.StringIO()
    progress = Progress(4, 0, stream=stream)
    losses = [3.0, 1.0, 2.0, 2.0]
    for i, loss in enumerate(losses, start=1):
        progress.update(i, loss)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and all("loss (ema 0.99) " in line for line in lines)
    weights = [0.99 ** (len(losses) - 1 - i) for i in range(len(losses))]
    expected = sum(w * x for w, x in zip(weights, losses)) / sum(weights)
    assert f"loss (ema 0.99) {expected:.4f} |" in lines[-1] and f"{expected:.4f}" != "2.0000"


def test_end_of_run_names_its_files(finished):
    out, stdout = finished["out"], finished["stdout"]
    assert f"checkpoint {out / 'checkpoint.pt'}\n" in stdout
    assert f"metrics    {out / 'metrics.json'}\n" in stdout
    assert f"loss curve {out / 'loss.png'} (log10 of the loss" in stdout


def test_loss_curve_explains_its_log10_axis():
    fig = plot_losses([math.exp(-i / 100) + 2 for i in range(500)])
    label = fig.axes[0].get_ylabel()
    assert label.startswith("log10(loss)") and "0.3 of 2.0" in label
    assert f"{10 ** 0.3:.1f}" == "2.0" and f"{10 ** 0.5:.1f}" == "3.2"  # what the label says


def test_a_small_checkpoint_every_calibrates_once_an_epoch(words, tmp_path, monkeypatch):
    calls = []
    real = mlp.calibrate
    monkeypatch.setattr(mlp, "calibrate", lambda *a: calls.append(1) or real(*a))
    code, _, stderr = _short(words, tmp_path, "--checkpoint-every", "1", "--steps", "300")
    assert code == 0, stderr
    n_train = len(data.load_contexts(words, block_size=3).Y_train)
    epochs = 300 * 16 // n_train  # SMALL's batch of 16
    assert 1 <= len(calls) <= epochs + 1  # the periodic ones, then the end of the run's


def test_sample_from_an_uncalibrated_checkpoint_calibrates_from_the_data(
    words, tmp_path, monkeypatch
):
    """A run that stopped uncleanly leaves a periodic checkpoint with no batchnorm statistics."""
    real_step, calls = mlp.STEPS["generated"], []

    def crash_at_step_35(params, Xb, Yb):
        calls.append(1)
        if len(calls) == 35:
            raise MemoryError("simulated crash")
        return real_step(params, Xb, Yb)

    monkeypatch.setitem(mlp.STEPS, "generated", crash_at_step_35)
    with pytest.raises(MemoryError):
        _short(words, tmp_path, "--checkpoint-every", "10")
    assert load(tmp_path / "checkpoint.pt")["bn_stats"] is None
    code, stdout, stderr = train_cli("--sample", "5", "--out", str(tmp_path))
    assert code == 0 and len(stdout.splitlines()) == 5, stderr
    moved = tmp_path / "moved.txt"
    words.rename(moved)
    try:
        code, _, stderr = train_cli("--sample", "5", "--out", str(tmp_path))
        assert code == 2 and "give --data PATH" in stderr
        code, stdout2, _ = train_cli("--sample", "5", "--out", str(tmp_path), "--data", str(moved))
        assert code == 0 and stdout2 == stdout
    finally:
        moved.rename(words)


def test_one_word_is_too_few_in_good_grammar():
    with pytest.raises(data.DataError, match="^1 word is too few"):
        data.split_words(["ab"])


# --- hints say what a make user types -----------------------------------------------------------


def test_second_make_train_says_train_args(words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --out runs/default, here inside tmp_path
    assert train_cli("--data", str(words), "--steps", "20", *SMALL)[0] == 0
    monkeypatch.setenv(preflight.MAKE_ENV, "train")
    code, _, stderr = train_cli("--data", str(words), "--steps", "20", *SMALL)
    assert code == 2
    assert "`make train TRAIN_ARGS=--resume`" in stderr
    assert "`make train TRAIN_ARGS=--overwrite`" in stderr
    monkeypatch.delenv(preflight.MAKE_ENV)
    code, _, stderr = train_cli("--data", str(words), "--steps", "20", *SMALL)
    assert "`python -m train --resume --out runs/default`" in stderr


def test_the_makefile_tells_train_it_runs_under_make():
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\ntrain:", 1)[1].split("\n\n", 1)[0]
    assert f"{preflight.MAKE_ENV}=train $(PY) -m train" in recipe


def test_a_checkpoint_keeps_its_permissions(words, tmp_path):
    # found by probing: mkstemp's 0600 made every checkpoint private and reset a user's chmod
    # at each save
    import os

    out = tmp_path / "perm"
    assert _short(words, out, "--steps", "10")[0] == 0
    mask = os.umask(0)
    os.umask(mask)
    assert (out / "checkpoint.pt").stat().st_mode & 0o777 == 0o666 & ~mask
    (out / "checkpoint.pt").chmod(0o640)
    assert _short(words, out, "--steps", "20", "--resume")[0] == 0
    assert load(out / "checkpoint.pt")["step"] == 20
    assert (out / "checkpoint.pt").stat().st_mode & 0o777 == 0o640
