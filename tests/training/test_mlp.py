"""The makemore MLP (python -m train): the generated loop against autograd, resume, data errors,
divergence.

Every run uses a small word list the test writes itself and a small model, so the whole file
takes seconds; the real names dataset is never read here.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest
import torch

from tests.training.helpers import MLP_SMALL as SMALL
from tests.training.helpers import REPO, load, max_param_diff, train_cli, write_words
from train import data
from train.models import mlp
from train.models.mlp_net import BatchNormStats, split_loss
from train.report import windowed_log10

STEPS = 300


@pytest.fixture(scope="module")
def words(tmp_path_factory) -> Path:
    return write_words(tmp_path_factory.mktemp("data") / "words.txt")


@pytest.fixture(scope="module")
def reference(words, tmp_path_factory) -> dict:
    """One uninterrupted float64 run with the generated backward, shared by several tests."""
    out = tmp_path_factory.mktemp("reference")
    code, stdout, stderr = train_cli(
        "--data", str(words), "--steps", str(STEPS), "--dtype", "float64", *SMALL, "--out", str(out)
    )
    assert code == 0, stderr
    return {"out": out, "stdout": stdout, "ckpt": load(out / "checkpoint.pt")}


# --- the generated loop against autograd ------------------------------------------------------


def test_generated_and_autograd_runs_agree_in_float64(words, reference, tmp_path):
    code, _, stderr = train_cli(
        "--data",
        str(words),
        "--steps",
        str(STEPS),
        "--dtype",
        "float64",
        *SMALL,
        "--backward",
        "autograd",
        "--out",
        str(tmp_path),
    )
    assert code == 0, stderr
    gen, ag = reference["ckpt"], load(tmp_path / "checkpoint.pt")
    assert gen["step"] == ag["step"] == STEPS
    assert len(gen["losses"]) == len(ag["losses"]) == STEPS
    assert (gen["losses"] - ag["losses"]).abs().max().item() < 1e-9
    assert max_param_diff(gen, ag) < 1e-9
    # and training did something: the last 50 batches are well below the first loss
    assert gen["losses"][-50:].mean() < gen["losses"][0] - 0.3


def test_check_every_prints_the_gradient_table(words, tmp_path):
    code, stdout, _ = train_cli(
        "--data",
        str(words),
        "--steps",
        "60",
        "--dtype",
        "float64",
        *SMALL,
        "--check-every",
        "25",
        "--out",
        str(tmp_path),
    )
    assert code == 0
    for at in (0, 25, 50):
        assert f"gradient check at step {at}:" in stdout
    rows = re.findall(
        r"^(\w+)\s+\| exact: (\w+)\s*\| approximate: (\w+)\s*\| maxdiff: (\S+)$", stdout, flags=re.M
    )
    assert [r[0] for r in rows[:7]] == ["C", "W1", "b1", "W2", "b2", "bngain", "bnbias"]
    assert len(rows) == 3 * 7
    assert all(r[2] == "True" and float(r[3]) < 1e-10 for r in rows)


# --- checkpoints, resume, interrupt -------------------------------------------------------------


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_resume_after_ctrl_c_equals_an_uninterrupted_run(
    words, reference, tmp_path, monkeypatch, optimizer
):
    """A real SIGINT during step 120; the run saves at the step boundary, then resumes."""
    common = ["--data", str(words), "--steps", str(STEPS), "--dtype", "float64", *SMALL]
    common += ["--optimizer", optimizer]
    if optimizer == "sgd":
        whole = reference["ckpt"]
    else:
        code, _, stderr = train_cli(*common, "--out", str(tmp_path / "whole"))
        assert code == 0, stderr
        whole = load(tmp_path / "whole" / "checkpoint.pt")

    real_step, calls = mlp.STEPS["generated"], []

    def step_then_ctrl_c(params, Xb, Yb):
        calls.append(1)
        if len(calls) == 120:
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(params, Xb, Yb)

    monkeypatch.setitem(mlp.STEPS, "generated", step_then_ctrl_c)
    out = tmp_path / "split"
    code, _, stderr = train_cli(*common, "--out", str(out))
    assert code == 130
    assert f"python -m train --resume --out {out}" in stderr
    assert load(out / "checkpoint.pt")["step"] == 120

    monkeypatch.setitem(mlp.STEPS, "generated", real_step)
    code, _, stderr = train_cli("--resume", "--out", str(out))  # options come from the checkpoint
    assert code == 0, stderr
    resumed = load(out / "checkpoint.pt")
    assert resumed["step"] == STEPS
    assert torch.equal(resumed["losses"], whole["losses"])
    assert max_param_diff(resumed, whole) == 0.0


def test_ctrl_c_in_a_real_process_saves_and_exits_130(words, tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "train", "--data", str(words), "--steps", "100000", *SMALL]
    proc = subprocess.Popen(
        argv + ["--out", str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "checkpoint.pt").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "resume with: python -m train --resume" in stderr
    assert 100 <= load(out / "checkpoint.pt")["step"] < 100000


def test_resume_refuses_options_that_change_the_run(reference):
    code, _, stderr = train_cli("--resume", "--out", str(reference["out"]), "--n-hidden", "32")
    assert code == 2
    assert "--n-hidden 16" in stderr


def test_extending_a_finished_run_keeps_its_lr_dropped(reference, tmp_path):
    """A finished run's lr dropped to lr / 10 at its halfway step; extended with --steps, the
    drop was recomputed as half the new steps and the lr went back up ten times (found by
    probing). The drop stays where it was, and the stored config says so."""
    out = tmp_path / "run"
    out.mkdir()
    for f in reference["out"].iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    code, stdout, stderr = train_cli("--resume", "--steps", str(STEPS + 20), "--out", str(out))
    assert code == 0, stderr
    assert f"from step {STEPS // 2:,}" in stdout + stderr, stdout + stderr
    config = mlp.MLPConfig.from_dict(load(out / "checkpoint.pt")["config"])
    assert config.steps == STEPS + 20 and config.lr_at(STEPS) == config.lr / 10


def test_a_new_run_does_not_overwrite_an_existing_one(words, reference):
    code, _, stderr = train_cli("--data", str(words), "--out", str(reference["out"]))
    assert code == 2
    assert "--resume" in stderr and "--overwrite" in stderr


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(words, tmp_path):
    code, stdout, stderr = train_cli(
        "--data",
        str(words),
        "--steps",
        "200",
        *SMALL,
        "--lr",
        "1e30",
        "--checkpoint-every",
        "1",
        "--out",
        str(tmp_path),
    )
    assert code == 1
    match = re.search(r"training diverged: the loss is (nan|inf) at step (\d+)", stderr)
    assert match, stderr
    assert "last good checkpoint" in stderr and "Traceback" not in stderr
    saved = load(tmp_path / "checkpoint.pt")
    assert saved["step"] == int(match.group(2)) - 1 >= 1
    assert all(torch.isfinite(p).all() for p in saved["params"].values())
    assert torch.isfinite(saved["losses"]).all()
    assert "samples:" not in stdout


# --- what a finished run leaves behind ----------------------------------------------------------


def test_metrics_match_the_checkpoint(words, reference):
    metrics = json.loads((reference["out"] / "metrics.json").read_text())
    assert metrics["steps"] == STEPS and metrics["backward"] == "generated"
    assert metrics["steps_per_s"] > 0 and metrics["seconds"] > 0
    ckpt = reference["ckpt"]
    ds = data.load_contexts(words, block_size=3)
    stats = BatchNormStats(**ckpt["bn_stats"])
    assert metrics["train_loss"] == split_loss(ckpt["params"], stats, ds.X_train, ds.Y_train)
    assert metrics["val_loss"] == split_loss(ckpt["params"], stats, ds.X_val, ds.Y_val)
    assert f"val loss   {metrics['val_loss']:.4f}" in reference["stdout"]
    assert (reference["out"] / "loss.png").stat().st_size > 1000


def test_sample_from_a_checkpoint_repeats_the_runs_names(words, reference):
    code, stdout, _ = train_cli("--sample", "5", "--out", str(reference["out"]))
    assert code == 0
    names = stdout.splitlines()  # a name may be empty: '.' drawn first
    end_of_run = reference["stdout"].split("samples:\n")[1].splitlines()
    assert len(end_of_run) == 20 and names == end_of_run[:5]
    alphabet = set(words.read_text()) - {"\n"}
    assert all(set(name) <= alphabet for name in names)


def test_sample_without_a_checkpoint_is_a_clear_error(tmp_path):
    code, _, stderr = train_cli("--sample", "3", "--out", str(tmp_path))
    assert code == 2 and "no checkpoint" in stderr


def test_windowed_log10_averages_whole_windows():
    assert windowed_log10([10.0, 100.0, 1000.0, 10.0, 5.0], 2) == [1.5, 2.0]


# --- data -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "not found"),
        (b"", "empty"),
        (b"\n  \n", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"caf\xe9\nna\xefve\n", "not UTF-8"),
    ],
)
def test_bad_data_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "words.txt"
    if content is not None:
        path.write_bytes(content)
    code, _, stderr = train_cli("--data", str(path), "--out", str(tmp_path / "out"))
    assert code == 2
    assert stderr.startswith("error: ") and message in stderr and str(path) in stderr
    assert not (tmp_path / "out" / "checkpoint.pt").exists()


def test_bad_data_in_a_real_process_has_no_traceback(tmp_path):
    missing = tmp_path / "nope.txt"
    result = subprocess.run(
        [sys.executable, "-m", "train", "--data", str(missing), "--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: data file not found: {missing}"


def test_split_follows_the_seed(tmp_path):
    words = data.read_words(write_words(tmp_path / "w.txt", count=250, seed=3))
    train, val, test = data.split_words(words)
    assert (len(train), len(val), len(test)) == (200, 25, 25)
    shuffled = list(words)
    random.seed(42)  # the seed's own recipe
    random.shuffle(shuffled)
    assert train + val + test == shuffled
    chars = data.build_vocab(words)
    assert chars[0] == "." and list(chars[1:]) == sorted(set("".join(words)))
    X, Y = data.build_examples(val, chars, block_size=3)
    assert X.shape == (sum(len(w) + 1 for w in val), 3) and Y.shape == (X.shape[0],)
    assert X[0].tolist() == [0, 0, 0] and Y[len(val[0])].item() == 0  # '.' ends the first word


def test_too_few_words_to_split(tmp_path):
    with pytest.raises(data.DataError, match="too few"):
        data.split_words(["ab", "cd", "ef"])


def test_vocabulary_comes_from_the_file(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("".join(f"{w}\n" for w in ["zé", "ab", "bz", "a-b"] * 5))
    ds = data.load_contexts(path, block_size=2)
    assert ds.chars == ".-abzé"
    assert ds.X_train.shape[1] == 2 and int(ds.Y_train.max()) < len(ds.chars)


def test_data_env_var_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "mine.txt"))
    assert data.resolve_data_path(None) == tmp_path / "mine.txt"
    assert data.resolve_data_path("given.txt") == Path("given.txt")


class FakeResponse(io.BytesIO):
    """What ``urlopen`` returns, enough for ``download``."""


def test_download_without_network_fails_clearly(tmp_path, monkeypatch):
    def offline(url, timeout=None):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.delenv(data.DATA_ENV, raising=False)
    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    with pytest.raises(data.DataError, match="(?s)could not download .*--data PATH"):
        data.resolve_data_path(None, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_download_with_a_wrong_sha256_is_rejected(tmp_path, monkeypatch):
    monkeypatch.delenv(data.DATA_ENV, raising=False)
    monkeypatch.setattr(
        data.urllib.request, "urlopen", lambda url, timeout=None: FakeResponse(b"emma\nolivia\n")
    )
    with pytest.raises(data.DataError, match="sha256"):
        data.resolve_data_path(None, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_download_with_the_right_sha256_is_cached(tmp_path, monkeypatch):
    body = "".join(f"{w}\n" for w in ["emma", "olivia", "ava"] * 4).encode()
    fetched = []

    def fake_urlopen(url, timeout=None):
        fetched.append(url)
        return FakeResponse(body)

    monkeypatch.delenv(data.DATA_ENV, raising=False)
    monkeypatch.setattr(data.urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setattr(data, "NAMES_SHA256", hashlib.sha256(body).hexdigest())
    first = data.resolve_data_path(None, cache_dir=tmp_path)
    second = data.resolve_data_path(None, cache_dir=tmp_path)
    assert first == second == tmp_path / "names.txt" and first.read_bytes() == body
    assert fetched == [data.NAMES_URL]


def test_cli_without_data_or_network_is_a_clear_error(tmp_path, monkeypatch):
    def offline(url, timeout=None):
        raise urllib.error.URLError("offline")

    monkeypatch.delenv(data.DATA_ENV, raising=False)
    monkeypatch.setattr(data, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    code, _, stderr = train_cli("--out", str(tmp_path / "out"))
    assert code == 2 and "could not download" in stderr


def test_a_config_gives_the_shared_defaults_in_its_class_line():
    from dataclasses import dataclass, fields

    from train.config import Schedule

    assert {f.name: f.default for f in fields(mlp.MLPConfig)}["batch_size"] == 32
    with pytest.raises(TypeError, match="give defaults for exactly steps, seed, lr, batch_size"):

        @dataclass(frozen=True)
        class Partial(Schedule, steps=10, lr=0.1):
            pass
