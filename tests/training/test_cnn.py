"""Tests for ``python -m train --model cnn``: the generated loop against autograd at every step,
the gradient table, resume after Ctrl-C, its options, and a short run that learns the digits.

Most runs use the small IDX files the classifier's tests write (6x6 noisy prototypes: two blocks
pool them to 1x1) and a narrow network, so the file takes seconds; MNIST is never read.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import torch

from tests.training.helpers import load, train_cli, write_folder
from train.models import cnn

SMALL = ["--channels", "4,6", "--batch-size", "16", "--monitor-every", "10"]
STEPS = 40


def train_cnn(*argv: str) -> tuple[int, str, str]:
    """``python -m train --model cnn ARGV`` in-process: (exit code, stdout, stderr)."""
    return train_cli("--model", "cnn", *argv)


def run_args(folder: Path, out: Path, *extra: str, steps: int = STEPS) -> list[str]:
    data = ["--data", str(folder), "--no-verify", "--steps", str(steps), *SMALL]
    return [*data, "--checkpoint-every", "25", "--no-figure", "--out", str(out), *extra]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_folder(tmp_path_factory.mktemp("idx"))


# --- the generated loop against autograd ----------------------------------------------------------


@pytest.mark.parametrize(
    "optimizer",
    [["adam", "--lr", "0.01"], ["sgd", "--clip-grad-norm", "0.5"]],
    ids=["adam", "sgd-clip"],
)
def test_generated_and_autograd_agree_at_every_step_in_float64(folder, tmp_path, optimizer):
    runs = {}
    for backward in ("generated", "autograd"):
        extra = ["--dtype", "float64", "--optimizer", *optimizer, "--backward", backward]
        code, _, stderr = train_cnn(*run_args(folder, tmp_path / backward, *extra))
        assert code == 0, stderr
        runs[backward] = load(tmp_path / backward / "checkpoint.pt")
    gen, ag = runs["generated"], runs["autograd"]
    assert len(gen["losses"]) == len(ag["losses"]) == STEPS
    assert (gen["losses"] - ag["losses"]).abs().max().item() < 1e-9
    assert (
        max((gen["params"][k] - ag["params"][k]).abs().max().item() for k in gen["params"]) < 1e-9
    )
    assert [r["val_loss"] for r in gen["history"]] == pytest.approx(
        [r["val_loss"] for r in ag["history"]], abs=1e-9
    )
    assert gen["losses"][-10:].mean() < gen["losses"][:10].mean() - 0.3  # it learned


def test_the_generated_step_matches_autograd_on_one_batch():
    """Random weights, images with flat regions: max-pool windows with tied maxima, ReLU inputs
    at exactly the bias, odd sizes (7x9 pools to 3x4, then 1x2)."""
    g = torch.Generator().manual_seed(5)
    shapes = cnn.param_shapes((3, 5), 3, 5 * 1 * 2, 10)
    params = {k: torch.randn(s, generator=g, dtype=torch.float64) for k, s in shapes.items()}
    X = torch.randn(6, 1, 7, 9, generator=g, dtype=torch.float64)
    X[:2] = 0.0  # flat images: every window ties, every pre-activation is the bias
    X[2, :, :4, :4] = 1.5
    Y = torch.randint(0, 10, (6,), generator=g)
    loss_g, acc_g, grads_g = cnn.generated_step(params, X, Y)
    loss_a, acc_a, grads_a = cnn.autograd_step(params, X, Y)
    assert abs(loss_g - loss_a) < 1e-12 and acc_g == acc_a
    for name in params:
        assert (grads_g[name] - grads_a[name]).abs().max().item() < 1e-12, name
    assert all(p.grad is None and not p.requires_grad for p in params.values())


def test_the_generated_loop_calls_no_loss_backward():
    source = Path(cnn.__file__).read_text()
    body = source.split("def generated_step")[1].split("def autograd_step")[0]
    assert ".backward()" not in body and "autograd" not in body
    for op in ("conv2d", "relu", "max_pool2d", "linear", "cross_entropy"):
        assert f"{op}.backward(" in body, op


def test_check_every_prints_the_gradient_table(folder, tmp_path):
    extra = ["--dtype", "float64", "--check-every", "15"]
    code, stdout, stderr = train_cnn(*run_args(folder, tmp_path, *extra, steps=30))
    assert code == 0, stderr
    assert "gradient check at step 15:" in stdout and "gradient check at step 30:" in stdout
    rows = re.findall(
        r"^(\w+)\s+\| exact: (\w+)\s*\| approximate: (\w+)\s*\| maxdiff: (\S+)$", stdout, flags=re.M
    )
    assert [r[0] for r in rows[:6]] == ["W1", "b1", "W2", "b2", "W3", "b3"] and len(rows) == 12
    assert all(r[2] == "True" and float(r[3]) < 1e-12 for r in rows)


# --- checkpoints, resume --------------------------------------------------------------------------


def test_resume_after_ctrl_c_equals_an_uninterrupted_run(folder, tmp_path, monkeypatch):
    args = ["--dtype", "float64", "--optimizer", "rmsprop"]
    code, _, stderr = train_cnn(*run_args(folder, tmp_path / "whole", *args))
    assert code == 0, stderr
    whole = load(tmp_path / "whole" / "checkpoint.pt")

    real_step, calls = cnn.STEPS["generated"], []

    def step_then_ctrl_c(params, Xb, Yb):
        calls.append(1)
        if len(calls) == 17:
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(params, Xb, Yb)

    monkeypatch.setitem(cnn.STEPS, "generated", step_then_ctrl_c)
    out = tmp_path / "split"
    code, _, stderr = train_cnn(*run_args(folder, out, *args))
    assert code == 130
    assert f"--model cnn --resume --out {out}" in stderr
    assert load(out / "checkpoint.pt")["step"] == 17
    monkeypatch.setitem(cnn.STEPS, "generated", real_step)
    code, _, stderr = train_cnn("--resume", "--out", str(out))  # options from the checkpoint
    assert code == 0, stderr
    resumed = load(out / "checkpoint.pt")
    assert resumed["model"] == "cnn" and resumed["config"]["channels"] == [4, 6]
    assert torch.equal(resumed["losses"], whole["losses"])
    assert all(torch.equal(resumed["params"][k], whole["params"][k]) for k in whole["params"])
    assert resumed["history"] == whole["history"]


def test_resume_refuses_another_network(folder, tmp_path):
    out = tmp_path / "run"
    assert train_cnn(*run_args(folder, out, steps=5))[0] == 0
    code, _, stderr = train_cnn("--resume", "--out", str(out), "--channels", "8,8")
    assert code == 2 and "--channels (4, 6)" in stderr


# --- options --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--channels", "4,x"], "--channels wants channel counts like 16,32, got '4,x'"),
        (["--channels", "0"], "--channels wants channel counts"),
        (["--kernel", "2"], "--kernel must be odd"),
        (["--channels", "2,2,2"], "3 2x2 pools shrink 6x6 images to nothing; give at most 2"),
        (["--optimizer", "lion"], "unknown optimizer 'lion'"),
    ],
)
def test_bad_options_are_one_clear_line(folder, tmp_path, argv, message):
    code, _, stderr = train_cnn(*run_args(folder, tmp_path, *argv))
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith("error: ") and message in stderr
    assert not (tmp_path / "checkpoint.pt").exists()


# --- it learns ------------------------------------------------------------------------------------


def test_a_short_run_learns_the_digits(tmp_path):
    """200 steps of a narrow CNN on scikit-learn's 8x8 digits at a high lr: 94% (the default
    run reaches 98%: docs/training.md)."""
    argv = ["--data", "digits", "--channels", "8,16", "--steps", "200", "--lr", "0.01"]
    argv += ["--out", str(tmp_path)]
    code, stdout, stderr = train_cnn(*argv, "--no-figure")
    assert code == 0, stderr
    test_acc = float(re.search(r"^test .* accuracy ([\d.]+)%$", stdout, re.M).group(1))
    assert test_acc > 90
