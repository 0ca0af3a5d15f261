"""``generate --jobs N`` (derive.parallel) writes what one process writes, byte for byte, and
fails as one process fails: the first op that fails (in sorted order) is the one error line,
and no module is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPS = ["ops/relu.py", "ops/sigmoid.py", "ops/tanh.py"]
BAD = """from derive import Op

OP = Op(name="broken", inputs=["x[N]"], definitions=["out[n] = x[n] + y[n]"])
"""


def _generate(work: Path, files: list[str], *extra: str) -> subprocess.CompletedProcess:
    """``python -m derive generate FILES --out generated EXTRA`` in ``work`` (ops/ beside it)."""
    work.mkdir()
    (work / "ops").symlink_to(work.parent / "ops")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "derive", "generate", *files, "--out", "generated", *extra]
    return subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def _ops(tmp_path: Path, *extra: tuple[str, str]) -> None:
    (tmp_path / "ops").mkdir()
    for name in OPS:
        (tmp_path / name).write_text((ROOT / name).read_text())
    for name, text in extra:
        (tmp_path / "ops" / name).write_text(text)


def test_jobs_write_the_bytes_of_one_process(tmp_path: Path) -> None:
    _ops(tmp_path)
    one = _generate(tmp_path / "one", OPS, "--formulas", "--jobs", "1")
    two = _generate(tmp_path / "two", OPS, "--formulas", "--jobs", "2")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert one.stdout == two.stdout
    written = _files(tmp_path / "one" / "generated")
    assert set(written) == {"__init__.py", "relu.py", "sigmoid.py", "tanh.py", "FORMULAS.md"} | {
        "formulas.html"
    }
    assert written == _files(tmp_path / "two" / "generated")


def test_jobs_fail_at_the_first_failing_op_as_one_process_does(tmp_path: Path) -> None:
    _ops(tmp_path, ("sad.py", BAD))  # sorted between relu and sigmoid
    files = sorted(OPS + ["ops/sad.py"])
    one = _generate(tmp_path / "one", files, "--formulas", "--jobs", "1")
    two = _generate(tmp_path / "two", files, "--formulas", "--jobs", "2")
    assert one.returncode == two.returncode == 1
    error = [line for line in one.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "broken" in error[0] and "Traceback" not in one.stderr
    assert [line for line in two.stderr.splitlines() if line.startswith("error:")] == error
    assert "Traceback" not in two.stderr and error[0].endswith("; nothing was written")
    assert not (tmp_path / "one" / "generated").exists()
    assert not (tmp_path / "two" / "generated").exists()


CRASH = """import sys
import derive.parallel

class Crash(Exception):  # its constructor takes two arguments: it does not unpickle
    def __init__(self, where, what):
        super().__init__(f"{where}: {what}")

def emit(op, out_dir, stages):
    raise Crash(op.name, "the engine fell over here")

derive.parallel.emit = emit
from derive.__main__ import run
sys.exit(run())
"""


def test_a_worker_crash_shows_the_workers_traceback(tmp_path: Path) -> None:
    """An engine bug in a worker (here an exception that cannot be pickled back) reaches the
    user as the worker's own traceback, naming the exception and where it was raised, with
    nothing written; it came back as a pickling error that hid both."""
    _ops(tmp_path)
    work = tmp_path / "crash"
    work.mkdir()
    (work / "ops").symlink_to(tmp_path / "ops")
    (work / "crash.py").write_text(CRASH)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "crash.py", "generate", *OPS, "--out", "generated", "--jobs", "2"]
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "WorkerCrash" in done.stderr and "the engine fell over here" in done.stderr
    assert "in emit" in done.stderr, done.stderr
    assert not (work / "generated").exists()
