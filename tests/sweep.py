"""Issue 24's sweep, shared by tests/tools/test_bad_inputs_cli.py (``python -m derive``) and
tests/training/test_bad_inputs.py (``python -m train``): bad input to a CLI is one clear line,
never a traceback, and loses no file.

A ``Row`` is a command line, what its folder holds first (``setup``), a fragment of the one
error line and, where needed, a patch (a full disk, a read-only folder). ``check_row`` runs it
in a folder and checks that every file there before is byte for byte as it was.
"""

from __future__ import annotations

import contextlib
import errno
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

LONG = "n" * 300  # past NAME_MAX


@dataclass(frozen=True)
class Row:
    id: str
    argv: list[str]
    expect: str  # a fragment of the one error line
    setup: tuple[Callable, ...] = ()  # (folder, fixtures) -> None, each
    patch: Callable | None = None  # (monkeypatch) -> None: a full disk, a read-only folder


def put(name: str, content: bytes | str | None) -> Callable:
    """Setup: a file of the user's (None: a folder) at ``name``."""

    def setup(tmp: Path, fx: dict) -> None:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            path.mkdir()
        elif isinstance(content, str):
            path.write_text(content)
        else:
            path.write_bytes(content)

    return setup


def enospc(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", str(args[0]) if args else None)


def in_process(main: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` as a process would run it: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def check_row(
    row: Row,
    folder: Path,
    fx: dict,
    monkeypatch: pytest.MonkeyPatch,
    call: Callable[[list[str]], tuple[int, str, str]],
) -> None:
    """Run ``row`` in ``folder``: one error line holding ``row.expect``, a failing exit code, no
    traceback, and every file that was there before unchanged."""
    for setup in row.setup:
        setup(folder, fx)
    if row.patch:
        row.patch(monkeypatch)
    before = snapshot(folder)
    monkeypatch.chdir(folder)
    code, _, stderr = call(row.argv)
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if "error:" in line or "FAILED:" in line]
    assert len(errors) == 1 and row.expect in errors[0], stderr
    assert code not in (0, None), stderr
    after = snapshot(folder)
    lost = [name for name, raw in before.items() if after.get(name) != raw]
    assert not lost, f"changed or lost: {lost}"
