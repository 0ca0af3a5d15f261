"""Tests for ``python -m train --model gpt``: the generated loop against autograd, resume after
Ctrl-C, and the same run on two CPU processes under torchrun.

A tiny GPT on a word list the test writes itself (tests/training/helpers.py's), so the file takes
seconds; the real names dataset is never read here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.training.helpers import REPO, load, max_param_diff, train_cli, write_words
from train import engine
from train.exits import session
from train.models.gpt import STEPS

TINY = ["--n-layer", "2", "--n-head", "2", "--n-embd", "8", "--batch-size", "8"]
STEPS_RUN = 40


def gpt_cli(*argv: str) -> tuple[int, str, str]:
    """``python -m train --model gpt`` in-process; returns (exit code, stdout, stderr)."""
    return train_cli("--model", "gpt", *argv)


@pytest.fixture(scope="module")
def words(tmp_path_factory) -> Path:
    return write_words(tmp_path_factory.mktemp("data") / "words.txt", count=200)


def run(words: Path, out: Path, *extra: str) -> dict:
    code, _, stderr = gpt_cli("--data", str(words), *TINY, "--out", str(out), *extra)
    assert code == 0, stderr
    return load(out / "checkpoint.pt")


@pytest.fixture(scope="module")
def reference(words, tmp_path_factory) -> dict:
    """One uninterrupted float64 run with the generated backward."""
    out = tmp_path_factory.mktemp("reference")
    return run(words, out, "--steps", str(STEPS_RUN), "--dtype", "float64")


def test_generated_and_autograd_loops_agree_in_float64(words, reference, tmp_path):
    """The same loss at every step and the same parameters at the end, within 1e-9."""
    autograd = run(
        words, tmp_path, "--steps", str(STEPS_RUN), "--dtype", "float64", "--backward", "autograd"
    )
    assert reference["step"] == autograd["step"] == STEPS_RUN
    assert (reference["losses"] - autograd["losses"]).abs().max().item() <= 1e-9
    assert max_param_diff(reference, autograd) <= 1e-9
    assert reference["losses"][-5:].mean() < reference["losses"][:5].mean()  # it learns


def test_resume_after_ctrl_c_equals_an_uninterrupted_run(words, reference, tmp_path, monkeypatch):
    """A real SIGINT during step 15; the run saves at the step boundary, then resumes."""
    real_step, calls = STEPS["generated"], []

    def step_then_ctrl_c(*args, **kwargs):
        calls.append(1)
        if len(calls) == 15:
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(*args, **kwargs)

    monkeypatch.setitem(STEPS, "generated", step_then_ctrl_c)
    common = ["--data", str(words), *TINY, "--out", str(tmp_path), "--dtype", "float64"]
    code, _, stderr = gpt_cli(*common, "--steps", str(STEPS_RUN))
    assert code == 130, stderr
    assert f"python -m train --model gpt --resume --out {tmp_path}" in stderr
    assert load(tmp_path / "checkpoint.pt")["step"] == 15
    monkeypatch.setitem(STEPS, "generated", real_step)
    code, _, stderr = gpt_cli("--resume", "--out", str(tmp_path))
    assert code == 0, stderr
    resumed = load(tmp_path / "checkpoint.pt")
    assert torch.equal(resumed["losses"], reference["losses"])
    assert max_param_diff(resumed, reference) == 0.0


def test_a_run_never_replaces_another_and_a_missing_device_is_one_line(words, reference, tmp_path):
    run(words, tmp_path, "--steps", "2")
    code, _, stderr = gpt_cli("--data", str(words), *TINY, "--out", str(tmp_path))
    assert code == 2 and "already holds a training run" in stderr
    if not torch.cuda.is_available():
        code, _, stderr = gpt_cli("--data", str(words), "--device", "cuda", "--out", "unused")
        assert code == 2 and stderr.count("\n") == 1 and "no CUDA device" in stderr
    code, _, stderr = gpt_cli("--resume", "--out", str(tmp_path), "--n-embd", "16")
    assert code == 2 and "--n-embd 8" in stderr


def test_sample_repeats_the_runs_names(words, tmp_path):
    code, stdout, stderr = gpt_cli(
        "--data", str(words), *TINY, "--steps", "5", "--out", str(tmp_path)
    )
    assert code == 0, stderr
    names = stdout.split("samples:\n")[1].split()
    code, sampled, _ = gpt_cli("--sample", "20", "--out", str(tmp_path))
    assert code == 0 and sampled.split() == names


def torchrun(*argv: str) -> subprocess.Popen:
    """``torchrun --nproc_per_node=2 -m train --model gpt ARGV`` on the CPU (gloo)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    command += ["--standalone", "-m", "train", "--model", "gpt", *argv]
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_two_processes_survive_ctrl_c_and_match_one_process(words, tmp_path):
    """Two CPU processes, Ctrl-C'd (torchrun forwards SIGINT to both) after their first
    checkpoint, then resumed from rank 0's checkpoint, end with the parameters of one process
    trained on the same global batches. In float64, so the bound is tight (1e-9): in float32
    AdamW's steps of ~lr per weight turn a rounding difference in a gradient near 0 into a
    different step, and the parameters differ by up to ~lr."""
    out = tmp_path / "two"
    common = ["--data", str(words), *TINY, "--checkpoint-every", "10", "--dtype", "float64"]
    proc = torchrun(*common, "--steps", "100000", "--out", str(out))
    deadline = time.monotonic() + 90
    while not (out / "checkpoint.pt").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=90)
    assert "interrupted at step" in stderr and "saved" in stderr, stderr
    assert "resume with: torchrun --nproc_per_node=2 -m train --model gpt --resume" in stderr
    stopped = load(out / "checkpoint.pt")["step"]
    assert 10 <= stopped < 100000
    total = stopped + 10
    resumed = torchrun("--resume", "--steps", str(total), "--out", str(out))
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert stdout.count("test loss") == 1  # rank 0 alone reports
    two = load(out / "checkpoint.pt")
    one = run(words, tmp_path / "one", "--steps", str(total), "--dtype", "float64")
    assert two["step"] == one["step"] == total
    assert (two["losses"] - one["losses"]).abs().max().item() <= 1e-9
    assert max_param_diff(two, one) <= 1e-9


RAISED_BY_THE_LOOP = {
    "interrupted": engine.Interrupted(),
    "diverged": engine.Diverged(3, "the loss is nan"),
    "cannot write a periodic checkpoint": OSError(28, "No space left on device"),
    "second ctrl-c": KeyboardInterrupt(),
}


@pytest.mark.parametrize(
    "ending, meets, exit_code",
    [
        ("finished", True, 0),
        ("interrupted", True, 130),  # the all-reduced Ctrl-C flag: every rank stops at one step
        ("diverged", True, 1),  # the all-reduced loss: every rank sees it at one step
        ("final report fails", True, 1),  # rank 0 after the loop; the others wait at the barrier
        ("cannot write a periodic checkpoint", False, 1),  # rank 0 alone leaves the loop
        ("second ctrl-c", False, 130),
    ],
)
def test_ranks_meet_before_leaving_only_where_the_loop_ended_on_every_rank(
    ending, meets, exit_code, tmp_path
):
    """A rank that exited while rank 0 still wrote its report was seen (in a CI run)
    to die in gloo's teardown, and torchrun then failed a finished run; a barrier where the
    loop did not end on every rank would meet another rank's all-reduce and hang."""

    def train() -> None:
        if ending in RAISED_BY_THE_LOOP:
            raise RAISED_BY_THE_LOOP[ending]

    def finish() -> bool:
        if ending == "final report fails":
            raise OSError(28, "No space left on device")
        return True

    met = []
    run = SimpleNamespace(step=3, saved_step=None)
    progress = SimpleNamespace(close=lambda: None)
    ckpt = tmp_path / "checkpoint.pt"
    code = session(run, ckpt, train, progress, lambda: None, finish, "", meet=lambda: met.append(1))
    assert (code, met) == (exit_code, [1] if meets else [])


def test_a_process_of_several_leaves_with_its_code_its_output_and_its_exit_handlers():
    """``leave`` skips the interpreter's teardown (train.distributed.leave), not what a run
    owes before it: the exit code, the buffered stdout and stderr, Python's exit handlers."""
    script = (
        "import atexit, sys\n"
        "from train.distributed import leave\n"
        "atexit.register(lambda: print('handled', file=sys.stderr))\n"
        "print('buffered', end='')\n"
        "sys.stderr.write('said')\n"
        "leave(7)\n"
        "print('never')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert (proc.returncode, proc.stdout) == (7, "buffered"), proc.stderr
    assert proc.stderr == "saidhandled\n"


@pytest.mark.parametrize(("saved", "says"), [(8, "holds the finished run"), (5, "without saving")])
def test_a_second_ctrl_c_in_the_report_says_the_run_is_whole(saved, says, tmp_path, capsys):
    """A Ctrl-C while the final report is written (after the last step's checkpoint) said
    "stopped without saving" beside a checkpoint of the finished run, and gave no way on;
    metrics.json was the run's before (found by probing). It says the run is whole and how
    to write the report again; mid-run it says what it said."""

    def finish() -> bool:
        raise KeyboardInterrupt

    run = SimpleNamespace(step=8, saved_step=saved, config=SimpleNamespace(steps=8))
    progress = SimpleNamespace(close=lambda: None)
    hint = "python -m train --resume --out x"
    code = session(
        run, tmp_path / "checkpoint.pt", lambda: None, progress, lambda: None, finish, hint
    )
    err = capsys.readouterr().err
    assert code == 130 and says in err and len(err.strip().splitlines()) == 1, err
    assert (hint in err) == (saved == 8), err


@pytest.mark.parametrize(("block", "rows"), [(16, 1024), (32, 256), (301, 32)])
def test_a_splits_loss_takes_no_more_attention_than_a_step(block, rows, monkeypatch):
    # found by probing: 1,024 words of a 2,001-character word's attention at once took 20 GB
    # past the memory check (which counts the training batch) and the run was killed
    from train.models import gpt_net

    seen = []

    def logits(params, X, config):
        seen.append(X.shape[0])
        return torch.zeros(*X.shape, 3)

    monkeypatch.setattr(gpt_net, "logits_torch", logits)
    X = torch.zeros(2000, block, dtype=torch.long)
    gpt_net.split_loss({}, X, torch.zeros_like(X), SimpleNamespace(batch_size=32))
    assert max(seen) == rows and sum(seen) == 2000
