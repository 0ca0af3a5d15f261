"""Tests for ``python -m train --model classifier``: the generated loop against autograd at every
step, optimizers, clipping, monitoring, resume, divergence, and every data error.

Runs use small IDX files the tests write themselves (10 classes of 6x6 noisy prototypes) and a
small network, so the file takes seconds; MNIST is never read and nothing is downloaded.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest
import torch

from tests.training.helpers import REPO, load, train_cli, write_folder
from train.cli import main as front_door
from train.models import classifier
from train.models import classifier_data as data
from train.models.classifier_idx import read_idx, write_idx

HIDDEN = ["--hidden", "16,12"]
SMALL = [*HIDDEN, "--batch-size", "16", "--monitor-every", "10", "--checkpoint-every", "25"]
STEPS = 60
NAMES = [f.name for f in data.MNIST_FILES]


def classify(*argv: str) -> tuple[int, str, str]:
    """``python -m train --model classifier ARGV`` in-process: (exit code, stdout, stderr)."""
    return train_cli("--model", "classifier", *argv)


def run_args(folder: Path, out: Path, *extra: str, steps: int = STEPS) -> list[str]:
    return [
        "--data",
        str(folder),
        "--no-verify",
        "--steps",
        str(steps),
        *SMALL,
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_folder(tmp_path_factory.mktemp("idx"))


# --- the generated loop against autograd ------------------------------------------------------


def history_diff(a: list[dict], b: list[dict]) -> float:
    """Largest difference between two monitor histories, over every number in them."""
    worst = 0.0
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for key in ra:
            va, vb = ra[key], rb[key]
            for x, y in zip(
                va if isinstance(va, list) else [va], vb if isinstance(vb, list) else [vb]
            ):
                worst = max(worst, abs(x - y))
    return worst


@pytest.mark.parametrize(
    "optimizer",
    [["sgd", "--momentum", "0"], ["sgd"], ["rmsprop"], ["adam"], ["adamw"]],
    ids=["sgd", "sgd-momentum", "rmsprop-momentum", "adam", "adamw"],
)
@pytest.mark.parametrize("clip", [None, "0.3"], ids=["no-clip", "clip"])
def test_generated_and_autograd_agree_at_every_step_in_float64(folder, tmp_path, optimizer, clip):
    extra = ["--dtype", "float64", "--optimizer", *optimizer, "--no-figure"]
    extra += ["--clip-grad-norm", clip] if clip else []
    runs = {}
    for backward in ("generated", "autograd"):
        out = tmp_path / backward
        code, _, stderr = classify(*run_args(folder, out, *extra, "--backward", backward))
        assert code == 0, stderr
        runs[backward] = load(out / "checkpoint.pt")
    gen, ag = runs["generated"], runs["autograd"]
    assert len(gen["losses"]) == len(ag["losses"]) == STEPS
    assert (gen["losses"] - ag["losses"]).abs().max().item() < 1e-9
    assert (
        max((gen["params"][k] - ag["params"][k]).abs().max().item() for k in gen["params"]) < 1e-9
    )
    assert history_diff(gen["history"], ag["history"]) < 1e-9
    assert gen["losses"][-10:].mean() < gen["losses"][:10].mean() - 0.3  # it learned
    clipped = [r["grad_norm_before_clip"] > r["grad_norm_after_clip"] for r in gen["history"]]
    if clip:
        assert any(clipped)
        assert all(r["grad_norm_after_clip"] <= 0.3 + 1e-9 for r in gen["history"])
    else:
        assert not any(clipped)


def test_the_generated_step_matches_autograd_on_one_batch():
    g = torch.Generator().manual_seed(3)
    params = {
        "W1": torch.randn(7, 5, generator=g, dtype=torch.float64),
        "b1": torch.randn(5, generator=g, dtype=torch.float64),
        "W2": torch.randn(5, 10, generator=g, dtype=torch.float64),
        "b2": torch.randn(10, generator=g, dtype=torch.float64),
    }
    X = torch.randn(9, 7, generator=g, dtype=torch.float64)
    X[0, :] = 0.0  # with b1 of either sign, some pre-activations are exactly b1
    Y = torch.randint(0, 10, (9,), generator=g)
    loss_g, acc_g, grads_g = classifier.generated_step(params, X, Y)
    loss_a, acc_a, grads_a = classifier.autograd_step(params, X, Y)
    assert abs(loss_g - loss_a) < 1e-12 and acc_g == acc_a
    for name in params:
        assert (grads_g[name] - grads_a[name]).abs().max().item() < 1e-12, name
    assert all(p.grad is None and not p.requires_grad for p in params.values())


def test_the_generated_loop_calls_no_loss_backward():
    source = Path(classifier.__file__).read_text()
    body = source.split("def generated_step")[1].split("def autograd_step")[0]
    assert ".backward()" not in body and "autograd" not in body
    assert "relu.backward(" in body and "linear.backward(" in body
    assert "cross_entropy.backward(" in body


# --- checkpoints, resume, interrupt, divergence -------------------------------------------------


def test_resume_after_ctrl_c_equals_an_uninterrupted_run(folder, tmp_path, monkeypatch):
    args = ["--dtype", "float64", "--optimizer", "rmsprop", "--clip-grad-norm", "1"]
    code, _, stderr = classify(*run_args(folder, tmp_path / "whole", *args))
    assert code == 0, stderr
    whole = load(tmp_path / "whole" / "checkpoint.pt")

    real_step, calls = classifier.STEPS["generated"], []

    def step_then_ctrl_c(params, Xb, Yb):
        calls.append(1)
        if len(calls) == 33:
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(params, Xb, Yb)

    monkeypatch.setitem(classifier.STEPS, "generated", step_then_ctrl_c)
    out = tmp_path / "split"
    code, _, stderr = classify(*run_args(folder, out, *args))
    assert code == 130
    assert f"--model classifier --resume --out {out}" in stderr
    assert load(out / "checkpoint.pt")["step"] == 33
    monkeypatch.setitem(classifier.STEPS, "generated", real_step)
    code, _, stderr = classify("--resume", "--out", str(out))  # options come from the checkpoint
    assert code == 0, stderr
    resumed = load(out / "checkpoint.pt")
    assert torch.equal(resumed["losses"], whole["losses"])
    assert all(torch.equal(resumed["params"][k], whole["params"][k]) for k in whole["params"])
    assert resumed["history"] == whole["history"]


def test_ctrl_c_in_a_real_process_saves_and_exits_130(folder, tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "train", "--model", "classifier"]
    argv += run_args(folder, out, steps=10**6)
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (out / "checkpoint.pt").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "resume with: python -m train --model classifier --resume" in stderr
    assert 25 <= load(out / "checkpoint.pt")["step"] < 10**6


def test_resume_refuses_options_that_change_the_run(folder, tmp_path):
    out = tmp_path / "run"
    assert classify(*run_args(folder, out, steps=20))[0] == 0
    code, _, stderr = classify("--resume", "--out", str(out), "--optimizer", "sgd")
    assert code == 2 and "--optimizer adam" in stderr
    code, _, stderr = classify(*run_args(folder, out, steps=20))
    assert code == 2 and "--resume" in stderr and "--overwrite" in stderr


def test_files_a_run_did_not_write_are_never_replaced(folder, tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes")
    for extra in (["--checkpoint", str(mine), "--overwrite"], ["--metrics", str(mine)]):
        code, _, stderr = classify(*run_args(folder, tmp_path / "run", *extra, steps=5))
        assert code == 2 and stderr.count("\n") == 1
        assert f"{mine} exists and " in stderr and "refusing to replace it" in stderr
        assert mine.read_text() == "my notes"
    code, _, stderr = classify(*run_args(folder, tmp_path / "run", "--resume", "--overwrite"))
    assert code == 2 and "give one" in stderr


def test_a_damaged_checkpoint_is_refused(folder, tmp_path):
    out = tmp_path / "run"
    assert classify(*run_args(folder, out, "--no-figure", steps=5))[0] == 0
    payload = torch.load(out / "checkpoint.pt", weights_only=True)
    payload["params"]["W1"][0, 0] += 1.0  # contents changed, digest kept
    torch.save(payload, out / "checkpoint.pt")
    code, _, stderr = classify("--resume", "--out", str(out), "--steps", "10")
    assert code == 2 and "is damaged" in stderr


def test_a_nan_loss_stops_and_keeps_the_last_good_checkpoint(folder, tmp_path):
    extra = ["--optimizer", "sgd", "--lr", "1e30", "--checkpoint-every", "1"]
    code, stdout, stderr = classify(*run_args(folder, tmp_path, *extra))
    assert code == 1
    match = re.search(
        r"training diverged: the (loss|gradient norm) is (nan|inf) at step (\d+)", stderr
    )
    assert match, stderr
    assert "last good checkpoint" in stderr and "Traceback" not in stderr
    saved = load(tmp_path / "checkpoint.pt")
    assert saved["step"] == int(match.group(3)) - 1
    assert all(torch.isfinite(p).all() for p in saved["params"].values())
    assert "test  loss" not in stdout  # no final evaluation of a diverged run


# --- monitoring and what a run leaves behind ------------------------------------------------------


def test_metrics_history_and_monitor_figure(folder, tmp_path):
    extra = ["--optimizer", "sgd", "--momentum", "0", "--clip-grad-norm", "0.5"]
    extra += ["--metrics", str(tmp_path / "m.json")]
    code, stdout, stderr = classify(*run_args(folder, tmp_path / "run", *extra, steps=45))
    assert code == 0, stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics == json.loads((tmp_path / "m.json").read_text())
    history = metrics["history"]
    assert [r["step"] for r in history] == [10, 20, 30, 40, 45]
    for row in history:
        assert len(row["layer_grad_norm"]) == len(row["update_ratio"]) == 3  # three linear layers
        assert len(row["dead_relu"]) == 2 and all(0 <= d <= 1 for d in row["dead_relu"])
        assert row["grad_norm_after_clip"] <= min(row["grad_norm_before_clip"], 0.5 + 1e-6)
        total = sum(n**2 for n in row["layer_grad_norm"]) ** 0.5
        assert abs(total - row["grad_norm_before_clip"]) < 1e-4 * total
        assert all(-8 < r < 0 for r in row["update_ratio"])
        # plain SGD steps by exactly lr * grad: the applied ratio is the lr*grad ratio
        for applied, predicted in zip(row["applied_update_ratio"], row["update_ratio"]):
            assert abs(applied - predicted) < 1e-5
        assert 0 <= row["val_acc"] <= 1 and row["train_loss"] > 0
    assert history[0]["lr"] == 0.05 and history[-1]["lr"] == 0.005  # lr/10 from the halfway step
    test_line = stdout.split("\ntest  loss")[1].splitlines()[0]
    assert test_line.endswith(f"accuracy {100 * metrics['test_acc']:.2f}%")
    assert 0 <= metrics["test_acc"] <= 1 and metrics["steps_per_s"] > 0
    assert (tmp_path / "run" / "monitor.png").stat().st_size > 20_000
    assert "acc" in stderr and "left" in stderr  # the progress line


def test_dead_relus_are_counted_on_the_validation_split():
    from train.models.classifier_net import evaluate

    params = {
        "W1": torch.tensor([[1.0, -1.0, 0.0]]),
        "b1": torch.tensor([0.0, 0.0, -1.0]),  # unit 3 never fires; unit 2 fires for x < 0
        "W2": torch.ones(3, 10),
        "b2": torch.zeros(10),
    }
    result = evaluate(params, torch.tensor([[1.0], [2.0]]), torch.tensor([0, 1]))
    assert result.dead == [2 / 3]
    result = evaluate(params, torch.tensor([[1.0], [-2.0]]), torch.tensor([0, 1]))
    assert result.dead == [1 / 3]


# --- options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--optimizer", "lion"],
            "unknown optimizer 'lion'; choose one of sgd, rmsprop, adam, adamw",
        ),
        (["--clip-grad-norm", "-1"], "--clip-grad-norm must be 0 (0: no clipping) or a positive"),
        (["--clip-grad-norm", "nan"], "--clip-grad-norm must be"),
        (["--lr", "0"], "--lr must be a positive number"),
        (["--optimizer", "adam", "--momentum", "0.9"], "--momentum applies to sgd and rmsprop"),
        (["--hidden", "16,x"], "--hidden wants sizes like 256,128"),
    ],
)
def test_bad_options_are_one_clear_line(folder, tmp_path, argv, message):
    code, _, stderr = classify("--data", str(folder), "--no-verify", "--out", str(tmp_path), *argv)
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith("error: ") and message in stderr
    assert not (tmp_path / "checkpoint.pt").exists()


def test_front_door_picks_the_model(tmp_path, capsys):
    assert front_door(["--model", "perceptron"]) == 2
    assert "unknown --model 'perceptron'; choose one of mlp, classifier" in capsys.readouterr().err
    code = front_door(
        ["--model=classifier", "--data", str(tmp_path / "none"), "--out", str(tmp_path)]
    )
    assert code == 2 and "not a folder" in capsys.readouterr().err


def test_a_real_process_gets_one_line_and_no_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "train", "--model", "classifier", "--optimizer", "sgdd"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: unknown optimizer 'sgdd'; choose one of sgd, rmsprop, adam, adamw"
    )


# --- data -----------------------------------------------------------------------------------------


def damage(path: Path, how: str) -> None:
    raw = bytearray(path.read_bytes())
    if how == "magic":
        raw[2:4] = b"\x0d\x03"  # float32 elements: not MNIST's unsigned bytes
    elif how == "truncated":
        del raw[-7:]
    elif how == "longer":
        raw += b"\x00\x00"
    elif how == "label 10":
        raw[-1] = 10
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    "file, how, message",
    [
        ("train-images-idx3-ubyte", "magic", "magic number 00000d03 is not that of an IDX images"),
        ("t10k-labels-idx1-ubyte", "magic", "is not that of an IDX labels file (00000801)"),
        ("train-images-idx3-ubyte", "truncated", "the file is truncated or not an IDX file"),
        ("t10k-images-idx3-ubyte", "longer", "but its header says 40 x 6 x 6 = 1,456 bytes"),
        ("train-labels-idx1-ubyte", "label 10", "label 10 at index 119 is outside 0..9"),
    ],
)
def test_bad_idx_files_are_clear_errors_and_left_alone(tmp_path, file, how, message):
    folder = write_folder(tmp_path / "idx")
    damage(folder / file, how)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    code, _, stderr = classify(*run_args(folder, tmp_path / "out"))
    assert code == 2, stderr
    assert stderr.count("\n") == 1 and stderr.startswith(f"error: {folder / file}: ")
    assert message in stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not (tmp_path / "out" / "checkpoint.pt").exists()


def test_labels_and_images_must_pair_up(tmp_path):
    folder = write_folder(tmp_path / "idx")
    write_idx(folder / "t10k-labels-idx1-ubyte", torch.zeros(39, dtype=torch.uint8))
    with pytest.raises(
        data.DataError, match="has 39 labels but .*t10k-images-idx3-ubyte 40 images"
    ):
        data.load_data(str(folder), verify=False)


def test_a_checksum_mismatch_is_refused(folder, tmp_path):
    code, _, stderr = classify("--data", str(folder), *SMALL, "--out", str(tmp_path))
    assert code == 2 and stderr.count("\n") == 1
    assert f"error: {folder / 'train-images-idx3-ubyte'}: sha256 " in stderr
    assert "is not MNIST's train-images-idx3-ubyte (ba891046" in stderr and "not using it" in stderr
    assert not (tmp_path / "checkpoint.pt").exists()


def test_mnist_files_with_the_right_checksums_are_used(tmp_path, monkeypatch):
    """The checksums made to match small files: MNIST's path from start to end, .gz included."""
    folder = write_folder(tmp_path / "idx", gz=True)
    specs = [
        data.MnistFile(f.split, f.name, f.ndim, "0" * 64, data.sha256_of(folder / f"{f.name}.gz"))
        for f in data.MNIST_FILES
    ]
    monkeypatch.setattr(data, "MNIST_FILES", tuple(specs))
    ds = data.load_data(str(folder))
    assert ds.name == "mnist" and ds.image_shape == (6, 6) and ds.n_features == 36
    assert (len(ds.Y_train), len(ds.Y_val), len(ds.Y_test)) == (110, 10, 40)
    assert abs(ds.X_train.mean().item()) < 1e-5 and abs(ds.X_train.std().item() - 1) < 1e-5
    assert torch.equal(ds.Y_test, torch.arange(40) % 10)


def test_missing_files_and_folders_are_named(tmp_path):
    folder = write_folder(tmp_path / "idx")
    (folder / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(data.DataError, match="has no t10k-labels-idx1-ubyte"):
        data.load_data(str(folder), verify=False)
    with pytest.raises(data.DataError, match="not a folder"):
        data.load_data(str(tmp_path / "nowhere"))


def test_idx_files_round_trip_raw_and_gzipped(tmp_path):
    values = torch.randint(0, 256, (3, 4, 5), dtype=torch.uint8)
    for name in ("a-idx3-ubyte", "a-idx3-ubyte.gz"):
        assert torch.equal(read_idx(write_idx(tmp_path / name, values), 3), values)
    assert (
        gzip.decompress((tmp_path / "a-idx3-ubyte.gz").read_bytes())
        == (tmp_path / "a-idx3-ubyte").read_bytes()
    )
    (tmp_path / "b.gz").write_bytes(b"not gzip")
    with pytest.raises(data.DataError, match="not a readable gzip file"):
        read_idx(tmp_path / "b.gz", 3)


def test_no_copy_and_no_network_falls_back_to_the_digits(tmp_path, monkeypatch):
    def offline(url, timeout=None):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.delenv(data.MNIST_ENV, raising=False)
    monkeypatch.setattr("train.data.urllib.request.urlopen", offline)
    said = []
    ds = data.load_data(None, cache_dir=tmp_path / "cache", say=said.append)
    assert ds.name == "digits"
    assert "could not download" in said[-1] and "bundled 8x8 digits" in said[-1]
    assert not any((tmp_path / "cache").glob("*"))  # no half-downloaded file left


def test_a_download_is_verified_and_cached(tmp_path, monkeypatch):
    source = write_folder(tmp_path / "source", gz=True)
    served = {f"{data.MNIST_URL}/{name}.gz": (source / f"{name}.gz").read_bytes() for name in NAMES}
    specs = [
        data.MnistFile(f.split, f.name, f.ndim, "0" * 64, hashlib.sha256(served[u]).hexdigest())
        for f, u in zip(data.MNIST_FILES, served)
    ]
    fetched = []

    def fake_urlopen(url, timeout=None):
        fetched.append(url)
        return io.BytesIO(served[url])

    monkeypatch.delenv(data.MNIST_ENV, raising=False)
    monkeypatch.setattr(data, "MNIST_FILES", tuple(specs))
    monkeypatch.setattr("train.data.urllib.request.urlopen", fake_urlopen)
    first = data.load_data(None, cache_dir=tmp_path / "cache", say=lambda _: None)
    second = data.load_data(None, cache_dir=tmp_path / "cache", say=lambda _: None)
    assert first.name == second.name == "mnist" and first.sha256 == second.sha256
    assert sorted(fetched) == sorted(served)  # each file once


def test_the_digits_split_is_fixed_and_disjoint():
    a, b = data.load_digits(), data.load_digits()
    assert (len(a.Y_train), len(a.Y_val), len(a.Y_test)) == (1257, 270, 270)
    assert a.n_features == 64 and a.image_shape == (8, 8)
    assert torch.equal(a.X_test, b.X_test) and torch.equal(a.Y_train, b.Y_train)
    order = data.shuffled(1797)
    assert torch.equal(order.sort().values, torch.arange(1797))  # each image in one split only
    from sklearn.datasets import load_digits

    labels = torch.tensor(load_digits().target)
    assert torch.equal(labels[order[1527:]], a.Y_test) and torch.equal(
        labels[order[:1257]], a.Y_train
    )
    assert set(a.Y_test.tolist()) == set(range(10))
