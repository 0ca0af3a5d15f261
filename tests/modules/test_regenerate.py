"""generated/ is exactly what the generator makes, whatever the hash seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORMULAS = ["FORMULAS.md", "formulas.html"]  # written by make generate (generate --formulas)


HASHSEEDS = ["0", "4242"]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """generated/ made afresh under each hash seed; the two generations run at once (one a core)."""
    ops = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "ops").glob("*.py"))
    cmd = [sys.executable, "-m", "derive", "generate", *ops, "--out", "generated", "--formulas"]
    runs = {}
    for hashseed in HASHSEEDS:
        env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": str(ROOT)}
        # generate into a copy of the layout so the recorded command reads exactly as make's
        work = tmp_path_factory.mktemp(f"repo-{hashseed}")
        (work / "ops").symlink_to(ROOT / "ops")
        with (work / "log").open("w") as log:  # a file, not a pipe: no run waits on a full pipe
            run = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=log)
        runs[hashseed] = work, run
    folders = {}
    for hashseed, (work, run) in runs.items():
        assert run.wait() == 0, (work / "log").read_text()
        folders[hashseed] = work / "generated"
    return folders


@pytest.mark.parametrize("hashseed", HASHSEEDS)
def test_regeneration_is_byte_identical(fresh: dict[str, Path], hashseed: str) -> None:
    folder = fresh[hashseed]
    expected = sorted(p.name for p in (ROOT / "generated").glob("*.py")) + FORMULAS
    produced = sorted(p.name for p in folder.glob("*.py"))
    produced += [name for name in FORMULAS if (folder / name).exists()]
    assert produced == expected
    for name in expected:
        a = (ROOT / "generated" / name).read_text()
        b = (folder / name).read_text()
        assert a == b, f"generated/{name} differs from a fresh generation"


def test_every_generated_file_says_so() -> None:
    for path in (ROOT / "generated").glob("*.py"):
        if path.name == "__init__.py":
            continue
        head = path.read_text().splitlines()[:2]
        assert "@" + "generated" in head[0] and "do not edit" in head[0]
        assert head[1].startswith("# Regenerate with: python -m derive generate ops/")


def test_generated_code_binds_nothing_it_never_reads() -> None:
    # pyflakes' rules (ruff F): no unused binding, import or undefined name in any module, so a
    # dead `batch_shape = ...` or an unused `import math` cannot come back unnoticed
    cmd = [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F", "generated"]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
