"""The documentation's commands, in its order, each as written, succeed on a fresh copy.

Issue 11: `make train` then `make test` (the quick start's order) used to fail because a test
trained into the user's runs/. This test copies the checkout (tracked sources, no .venv, runs/
or data/) to a temporary folder and runs there every command of the README and then of the
pages in RUN (in that order), as they write it, then the README's example that uses the op it
generated; with these things that make it small and offline:

- ``.venv`` is a stand-in whose ``bin/python`` runs this interpreter (the real one would pip
  install torch, a download); its stamp is fresh, so make does not rebuild it;
- the data is a tiny word list, given as make's ``DATA`` and train's ``$BACKGEN_DATA`` (both
  documented), and every training command gets ``--steps 300`` and a small model appended
  (argparse takes the last value), so a run takes seconds; ``make train``'s come through
  ``TRAIN_ARGS``, which a command line ``TRAIN_ARGS=...`` (as in the README) overrides;
- ``make test`` runs only the test that used to fail in this order (``PYTEST_ADDOPTS``);
- ``make fuzz N=5000`` runs 5 cases (``N=5``): the fuzzer's own test runs 200.

The pages in NOT_RUN are left out, each for the reason it gives.
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

ROOT = Path(__file__).resolve().parents[2]
RUN = ["README.md", "docs/training.md", "docs/show-and-formulas.md", "docs/fuzzing.md"]
NOT_RUN = {
    "docs/benchmarks.md": "they time for minutes; tests/tools/test_bench.py runs the harness"
}
SMALL_RUN = ["--steps", "300", "--n-embd", "4", "--n-hidden", "16", "--batch-size", "16"]
SMALL_CLASSIFIER = ["--steps", "30", "--hidden", "16", "--batch-size", "16"]
SMALL_GPT = ["--steps", "30", "--n-layer", "1", "--n-head", "2", "--n-embd", "8"]
SMALL_CNN = ["--steps", "30", "--channels", "4,4", "--batch-size", "16"]
THE_TEST_THAT_BROKE = "test_bad_data_in_a_real_process_has_no_traceback"
LEFT_OUT = (".git", ".venv", "runs", "data", "__pycache__", ".pytest_cache", ".ruff_cache")


def commands(page: str) -> list[str]:
    """Command lines of a page's code blocks (fenced sh or indented), in order; trailing
    comments dropped."""
    text = (ROOT / page).read_text()
    blocks = re.finditer(r"```sh\n(.*?)```|\n\n((?:    .*\n)+)", text, re.S)
    lines = [line for m in blocks for line in (m.group(1) or m.group(2)).splitlines()]
    lines = [line.split("  #", 1)[0].strip() for line in lines]
    return [line for line in lines if re.match(r"(make|\.venv/bin/python|python)\b", line)]


def documented_commands() -> list[str]:
    return [command for page in RUN for command in commands(page)]


def python_block(first_line: str) -> str:
    """The README's ```python block that starts with first_line, that line dropped."""
    blocks = re.findall(r"```python\n(.*?)```", readme(), re.S)
    (found,) = [b for b in blocks if b.startswith(first_line)]
    return found.split("\n", 1)[1]


def is_training(argv: list[str]) -> bool:
    return argv[1:3] == ["-m", "train"] and not {"--help", "--sample"} & set(argv)


def copy_checkout(dest: Path) -> None:
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*LEFT_OUT, "*.egg-info"))
    venv_python = dest / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    venv_python.chmod(venv_python.stat().st_mode | stat.S_IEXEC)
    (dest / ".venv" / ".installed").touch()  # newer than pyproject.toml: make keeps it


def test_documented_commands_have_no_bare_python():
    """A plain `python` is not the environment make built: every command names .venv's."""
    documented = documented_commands()
    assert documented[:2] == ["make train", "make test"]  # the quick start
    assert not [c for c in documented if c.startswith("python ")]


def test_every_page_with_commands_is_run_or_says_why_not():
    pages = ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]
    with_commands = {page for page in pages if commands(page)}
    assert with_commands == set(RUN) | set(NOT_RUN), with_commands ^ (set(RUN) | set(NOT_RUN))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_documented_commands_run_in_order(tmp_path):
    from tests.training.helpers import write_words  # here: the fast tests above need no train/

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
        "CNN_ARGS": " ".join(SMALL_CNN),
        "BACKGEN_MNIST": "digits",  # documented; never a download in the test
        "PYTEST_ADDOPTS": f"-k {THE_TEST_THAT_BROKE}",
    }
    (clone / "my_ops").mkdir()  # the README's "Your own op" file, as it shows it
    (clone / "my_ops" / "sigmoid.py").write_text(python_block("# my_ops/sigmoid.py"))
    for command in documented_commands():
        argv = shlex.split(command)
        if is_training(argv):
            small = {"classifier": SMALL_CLASSIFIER, "gpt": SMALL_GPT, "cnn": SMALL_CNN}
            argv += next((v for k, v in small.items() if k in argv), SMALL_RUN)
        if argv[:2] == ["make", "fuzz"]:
            argv = [a if not a.startswith("N=") else "N=5" for a in argv]
        result = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True)
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr}"
        assert "Traceback" not in result.stderr, command
    assert (clone / "runs" / "default" / "checkpoint.pt").is_file()
    assert (clone / "runs" / "short" / "metrics.json").is_file()
    assert (clone / "my_generated" / "sigmoid.py").is_file()
    (clone / "use_sigmoid.py").write_text(python_block("# use_sigmoid.py"))
    used = subprocess.run(
        [".venv/bin/python", "use_sigmoid.py"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert used.returncode == 0, used.stderr


def readme() -> str:
    return (ROOT / "README.md").read_text()
