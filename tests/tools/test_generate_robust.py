"""``generate`` as a user's probe found it wanting: the mode written files get, all or nothing
for several op files, and how it stops on Ctrl-C, SIGTERM or an op file that exits.

Each test runs the command in-process (``derive.__main__.main``) but the signal ones, which send
a real signal to a ``python -m derive`` process with ``--jobs 2`` workers.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.op_table import SIGMOID
from tests.sweep import in_process

ROOT = Path(__file__).resolve().parents[2]
BAD = """from derive import Op

OP = Op(name="broken", inputs=["x[N]"], definitions=["out[n] = x[n] + y[n]"])
"""
# A worker that loads this op file sleeps in it (the parent loads it at once): a derivation a
# signal always finds running. It touches `started` first, for the test to wait on.
SLOW = """import multiprocessing, pathlib, time

if multiprocessing.parent_process() is not None:
    pathlib.Path("started").touch()
    time.sleep(300)
""" + SIGMOID.replace('name="sigmoid"', 'name="slow"')


def call(*argv: str) -> tuple[int, str, str]:
    from derive.__main__ import main

    return in_process(main, list(argv))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask():
    """Set the umask for one test (``umask(0o027)``), restored after."""
    before = os.umask(0o022)
    yield os.umask
    os.umask(before)


@pytest.mark.parametrize("mask", [0o022, 0o027], ids=["umask-022", "umask-027"])
def test_written_files_get_the_mode_open_would_give(tmp_path, monkeypatch, umask, mask):
    """mkstemp's 0o600 made modules only their writer could import (a container, CI)."""
    monkeypatch.chdir(tmp_path)
    Path("op.py").write_text(SIGMOID)
    umask(mask)
    assert call("generate", "op.py", "--out", "o", "--formulas")[0] == 0
    names = ["sigmoid.py", "FORMULAS.md", "formulas.html", "__init__.py"]
    assert {n: oct(mode(Path("o") / n)) for n in names} == {n: oct(0o666 & ~mask) for n in names}
    assert [p.name for p in Path("o").iterdir() if p.name.startswith(".")] == []


def test_replacing_a_file_keeps_its_mode(tmp_path, monkeypatch, umask):
    monkeypatch.chdir(tmp_path)
    Path("op.py").write_text(SIGMOID)
    umask(0o077)
    assert call("generate", "op.py", "--out", "o")[0] == 0
    module = Path("o/sigmoid.py")
    module.write_text(module.read_text() + "# an older version\n")
    module.chmod(0o664)
    code, out, _ = call("generate", "op.py", "--out", "o")
    assert code == 0 and "wrote o/sigmoid.py" in out
    assert mode(module) == 0o664 and "older" not in module.read_text()


def test_an_op_that_fails_writes_no_module(tmp_path, monkeypatch):
    """a.py's and b.py's modules were written before bad.py failed, and not said."""
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(SIGMOID)
    Path("b.py").write_text(SIGMOID.replace('name="sigmoid"', 'name="sigmoid_b"'))
    Path("bad.py").write_text(BAD)
    code, out, err = call("generate", "a.py", "b.py", "bad.py", "--out", "d", "--jobs", "1")
    assert code == 1 and out == "" and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "op 'broken'" in errors[0], err
    assert errors[0].endswith("; nothing was written")
    assert not Path("d").exists()


def test_an_op_that_fails_leaves_the_modules_there_as_they_were(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(SIGMOID)
    assert call("generate", "a.py", "--out", "d")[0] == 0
    before = {p.name: p.read_bytes() for p in Path("d").iterdir()}
    Path("a.py").write_text(SIGMOID.replace("exp(-x[n, m])", "exp(-2*x[n, m])"))
    Path("bad.py").write_text(BAD)
    assert call("generate", "a.py", "bad.py", "--out", "d", "--jobs", "1")[0] == 1
    assert {p.name: p.read_bytes() for p in Path("d").iterdir()} == before


@pytest.mark.parametrize("files", [["my_ops/typo.py"], ["op.py", "my_ops/typo.py"]])
def test_a_missing_op_file_creates_no_folder(tmp_path, monkeypatch, files):
    monkeypatch.chdir(tmp_path)
    Path("op.py").write_text(SIGMOID)
    code, _, err = call("generate", *files, "--out", "x1/sub")
    assert code == 1 and "op file my_ops/typo.py does not exist" in err
    assert not Path("x1").exists()


def test_a_users_page_refused_writes_no_module(tmp_path, monkeypatch):
    """Every path is checked before the first is written: FORMULAS.md is the user's."""
    monkeypatch.chdir(tmp_path)
    Path("op.py").write_text(SIGMOID)
    Path("o").mkdir()
    Path("o/FORMULAS.md").write_text("# my notes\n")
    code, _, err = call("generate", "op.py", "--out", "o", "--formulas")
    assert code == 1 and "o/FORMULAS.md exists and was not generated" in err
    assert sorted(os.listdir("o")) == ["FORMULAS.md"]


def test_ctrl_c_while_deriving_is_one_line(tmp_path, monkeypatch):
    """It was a traceback of some 130 lines from inside SymPy."""
    from derive.emit import generate

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    Path("op.py").write_text(SIGMOID)
    monkeypatch.setattr(generate, "emit", interrupted)
    code, out, err = call("generate", "op.py", "--out", "o")
    assert (code, out) == (130, "") and err.splitlines()[-1] == "interrupted: nothing was written"
    assert "Traceback" not in err and not Path("o").exists()


def test_a_signal_while_writing_is_held_until_every_file_is(tmp_path, monkeypatch):
    from derive import __main__ as cli
    from derive.emit import generate

    write, calls = generate.write_if_changed, []

    def interrupted_after(path, text):
        if not calls:  # one Ctrl-C, as the handler is called when it comes (a second stops)
            cli.STOP(signal.SIGINT, None)
        calls.append(path)
        return write(path, text)

    monkeypatch.chdir(tmp_path)
    Path("a.py").write_text(SIGMOID)
    Path("b.py").write_text(SIGMOID.replace('name="sigmoid"', 'name="sigmoid_b"'))
    monkeypatch.setattr(generate, "write_if_changed", interrupted_after)
    code, _, err = call("generate", "a.py", "b.py", "--out", "o", "--jobs", "1")
    assert code == 130
    assert err.splitlines()[-1] == "interrupted: wrote o/sigmoid.py, o/sigmoid_b.py"
    assert sorted(os.listdir("o")) == ["__init__.py", "sigmoid.py", "sigmoid_b.py"]


def test_an_op_file_raising_keyboard_interrupt_is_an_interrupt(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("op.py").write_text("raise KeyboardInterrupt\n")
    code, _, err = call("generate", "op.py", "--out", "o")
    assert code == 130 and err == "interrupted: nothing was written\n"


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    kids = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat_file.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("signum", "line"),
    [(signal.SIGTERM, "terminated"), (signal.SIGINT, "interrupted")],
    ids=["SIGTERM", "SIGINT"],
)
def test_a_signal_to_the_parent_alone_stops_the_workers(tmp_path, signum, line):
    """SIGTERM to the main process (not its group) left the --jobs workers orphaned, deriving
    forever; SIGINT to it alone waited for them."""
    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "op.py").write_text(SIGMOID)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "derive", "generate", "slow.py", "op.py", "--out", "o"]
    proc = subprocess.Popen(
        [*cmd, "--jobs", "2"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists() and proc.poll() is None:
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.1)
        workers = _children(proc.pid)
        assert workers, "no worker processes"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signum, err
        assert err.splitlines()[-1] == f"{line}: nothing was written", err
        assert "Traceback" not in err
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [w for w in workers if _alive(w)], "workers left running"
        assert not (tmp_path / "o").exists()
    finally:
        for pid in [proc.pid, *workers]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
