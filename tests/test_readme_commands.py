"""The README's commands, in the README's order, each as written, succeed on a fresh copy.

Issue 11: `make train` then `make test` (the quick start's order) used to fail because a test
trained into the user's runs/. This test copies the checkout (tracked sources, no .venv, runs/
or data/) to a temporary folder and runs every command of the README up to the benchmark
section there, as the README writes it, with three things that make it small and offline:

- ``.venv`` is a stand-in whose ``bin/python`` runs this interpreter (the real one would pip
  install torch, a download); its stamp is fresh, so make does not rebuild it;
- the data is a tiny word list, given as make's ``DATA`` and train's ``$BACKGEN_DATA`` (both
  documented), and every training command gets ``--steps 300`` and a small model appended
  (argparse takes the last value), so a run takes seconds; ``make train``'s come through
  ``TRAIN_ARGS``, which a command line ``TRAIN_ARGS=...`` (as in the README) overrides;
- ``make test`` runs only the test that used to fail in this order (``PYTEST_ADDOPTS``);
- ``make fuzz N=5000`` runs 5 cases (``N=5``): the fuzzer's own test runs 200.

The benchmark commands are left out: they time for minutes; tests/test_bench.py runs the
harness itself.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_train import write_words

ROOT = Path(__file__).resolve().parent.parent
SMALL_RUN = ["--steps", "300", "--n-embd", "4", "--n-hidden", "16", "--batch-size", "16"]
SMALL_CLASSIFIER = ["--steps", "30", "--hidden", "16", "--batch-size", "16"]
SMALL_GPT = ["--steps", "30", "--n-layer", "1", "--n-head", "2", "--n-embd", "8"]
THE_TEST_THAT_BROKE = "test_bad_data_in_a_real_process_has_no_traceback"
LEFT_OUT = (".git", ".venv", "runs", "data", "__pycache__", ".pytest_cache", ".ruff_cache")


def readme_commands() -> list[str]:
    """Command lines of the README's code blocks (fenced sh or indented), in order, up to the
    benchmark section; trailing comments dropped."""
    text = readme().split("\n## Benchmark", 1)[0]
    blocks = re.finditer(r"```sh\n(.*?)```|\n\n((?:    .*\n)+)", text, re.S)
    lines = [line for m in blocks for line in (m.group(1) or m.group(2)).splitlines()]
    lines = [line.split("  #", 1)[0].strip() for line in lines]
    return [line for line in lines if re.match(r"(make|\.venv/bin/python|python)\b", line)]


def is_training(argv: list[str]) -> bool:
    return argv[1:3] == ["-m", "train"] and not {"--help", "--sample"} & set(argv)


def copy_checkout(dest: Path) -> None:
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*LEFT_OUT, "*.egg-info"))
    venv_python = dest / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    venv_python.chmod(venv_python.stat().st_mode | stat.S_IEXEC)
    (dest / ".venv" / ".installed").touch()  # newer than pyproject.toml: make keeps it


def test_readme_commands_have_no_bare_python():
    """A plain `python` is not the environment make built: every command names .venv's."""
    commands = readme_commands()
    assert commands[:2] == ["make train", "make test"]
    assert not [c for c in commands if c.startswith("python ")]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_readme_commands_run_in_order(tmp_path):
    clone = tmp_path / "backgen"
    copy_checkout(clone)
    words = write_words(tmp_path / "words.txt", count=300)
    env = {
        **os.environ,
        "DATA": str(words),
        "BACKGEN_DATA": str(words),
        "TRAIN_ARGS": " ".join(SMALL_RUN),
        "CLASSIFIER_ARGS": " ".join(SMALL_CLASSIFIER),
        "GPT_ARGS": " ".join(SMALL_GPT),
        "BACKGEN_MNIST": "digits",  # documented; never a download in the test
        "PYTEST_ADDOPTS": f"-k {THE_TEST_THAT_BROKE}",
    }
    (clone / "my_ops").mkdir()  # the README's "Add your own op" file, as it shows it
    sigmoid = re.findall(r"```python\n# my_ops/sigmoid\.py.*?\n(.*?)```", readme(), re.S)
    (clone / "my_ops" / "sigmoid.py").write_text(sigmoid[0])
    for command in readme_commands():
        argv = shlex.split(command)
        if is_training(argv):
            small = {"classifier": SMALL_CLASSIFIER, "gpt": SMALL_GPT}
            argv += next((v for k, v in small.items() if k in argv), SMALL_RUN)
        if argv[:2] == ["make", "fuzz"]:
            argv = [a if not a.startswith("N=") else "N=5" for a in argv]
        result = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True)
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr}"
        assert "Traceback" not in result.stderr, command
    assert (clone / "runs" / "default" / "checkpoint.pt").is_file()
    assert (clone / "runs" / "short" / "metrics.json").is_file()
    assert (clone / "my_generated" / "sigmoid.py").is_file()


def readme() -> str:
    return (ROOT / "README.md").read_text()
