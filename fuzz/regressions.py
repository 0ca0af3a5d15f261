"""Minimal failing ops as op files in tests/regressions/, which the test suite runs.

A file holds the shrunk ``OP``, the input seed it failed with (``SEED``) and a comment saying
what failed and how to reproduce it. An existing file is never overwritten, and an op already
recorded (same inputs, definitions, params, mode) is not written again.
"""

from __future__ import annotations

import ast
import os
import re
import runpy
import subprocess
import tempfile
from pathlib import Path

import black

from derive.language import Op
from fuzz.check import Outcome
from fuzz.ops import op_source

FOLDER = Path(__file__).resolve().parent.parent / "tests" / "regressions"


def _key(op: Op) -> tuple:
    params, sizes = tuple(sorted(op.params.items())), tuple(sorted(op.sizes.items()))
    ranges = tuple(sorted(op.ranges.items()))
    return (tuple(op.inputs), tuple(op.definitions), params, sizes, ranges, op.stepwise)


def recorded(folder: Path = FOLDER) -> dict[tuple, Path]:
    """The ops already in the folder, by content: each file's ``OP = Op(...)`` read as
    literals, never run (``--out`` may name a folder of the user's own scripts, and running
    them to find their ops ran whatever they do; found by probing)."""
    out = {}
    for path in sorted(folder.glob("*.py")):
        op = _literal_op(path)
        if op is not None:
            out[_key(op)] = path
    return out


def _literal_op(path: Path) -> Op | None:
    """The file's ``OP = Op(name=..., ...)`` with every argument a literal, as the fuzzer
    writes it; None for any other file (unreadable, not python, or not such an op)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for stmt in tree.body:
        if not (
            isinstance(stmt, ast.Assign)
            and [getattr(t, "id", None) for t in stmt.targets] == ["OP"]
            and isinstance(stmt.value, ast.Call)
            and getattr(stmt.value.func, "id", None) == "Op"
            and not stmt.value.args
        ):
            continue
        try:
            return Op(**{k.arg: ast.literal_eval(k.value) for k in stmt.value.keywords})
        except (ValueError, TypeError, SyntaxError):
            return None
    return None


def short_name(outcome: Outcome, seed: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", outcome.kind.lower()).strip("_") or "wrong"
    return f"{slug}_s{seed}"


def write(op: Op, seed: int, outcome: Outcome, original: Op, folder: Path = FOLDER) -> Path | None:
    """Write the regression file; None if this op is already recorded."""
    folder.mkdir(parents=True, exist_ok=True)
    if _key(op) in recorded(folder):
        return None
    name = short_name(outcome, seed)
    path = folder / f"{name}.py"
    k = 1
    while path.exists():
        k += 1
        path = folder / f"{name}_{k}.py"
    mode = re.search(r" \((--[\w -]+)\)$", original.doc or "")  # (--affine), (--windows --powers)
    compiled = outcome.kind.startswith("compiled ")  # fuzz/compiled.py's verdict
    command = "python -m fuzz" + (f" {mode.group(1)}" if mode else "")
    command += " --compiled" if compiled else ""
    also = (
        ", and fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py)"
        if compiled
        else ""
    )
    comment = (
        f"Found by `{command}` (case seed {seed}) on {_commit()}, shrunk from"
        f" {len(original.definitions)} definition(s).\nFailed: {outcome.line()}\n"
        "Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs"
        f" it){also}."
    )
    text = op_source(op, comment).rstrip("\n") + f"\n\nSEED = {seed}\n"
    text = black.format_str(text, mode=black.Mode(line_length=100))  # as `make lint` wants it
    # staged under a name no other file has (mkstemp), then placed: never over a file, so a
    # file of the user's that appeared meanwhile is kept and this one takes the next name
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        while True:
            try:
                _place(tmp, path, text)
                break
            except FileExistsError:
                k += 1
                path = folder / f"{name}_{k}.py"
    finally:
        os.unlink(tmp)
    return path


def _place(staged: str, path: Path, text: str) -> None:
    """The staged file at ``path``, never replacing one (FileExistsError if it is taken): a hard
    link, whole at once; where the filesystem has no hard links, an exclusive create."""
    try:
        os.link(staged, path)
    except FileExistsError:
        raise
    except OSError:
        with open(path, "x") as f:
            f.write(text)


def _commit() -> str:
    """The engine's commit, so a reader knows what the failure was measured on."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=FOLDER.parent.parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "an unknown commit"
    return out.stdout.strip() or "an unknown commit"


def load(path: Path) -> tuple[Op, int]:
    namespace = runpy.run_path(str(path))
    return namespace["OP"], int(namespace.get("SEED", 0))
