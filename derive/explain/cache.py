"""``show``'s renderings kept on disk, each named by a hash of everything it is made from.

``show`` derives an op once (the explanation reads the derivation, never derives again), but a
run still pays SymPy's import (~0.4 s) and the derivation itself, every time, for an op that
has not changed. A rendering is a pure function of

- the op file's bytes and the path it is shown under (the header prints the path),
- the engine: every file under ``derive/`` (its templates included), the Python version, and the
  installed SymPy and black (their ``__init__.py``'s path, size and modification time),
- the mode (text, LaTeX, JSON) and, for text, the width.

Those are hashed into the entry's file name, so an entry is found only by a run that would print
exactly it: an edited op file or engine gives a new name, and nothing is invalidated by hand.
A hit imports neither SymPy nor the engine.

An op file whose result could depend on anything but its bytes is never cached: one that
imports beyond ``derive``'s front door (``from derive import Op``) and a few pure standard
modules, or names ``open``, ``exec``, ``__file__`` and the like (:func:`self_contained`).

The folder is ``$BACKGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/backgen``, else
``~/.cache/backgen``, the entries in its ``show/``; ``BACKGEN_CACHE_DIR=`` (empty) or ``show
--no-cache`` turns it off. Only files named ``<64 hex digits>.txt`` (and this module's own
``.tmp-`` files) are ever written or removed there, each written whole to a temporary file and
renamed into place; the least recently used go once there are more than :data:`MAX_ENTRIES`.
A cache that cannot be read or written is a miss, never an error: the op is derived as
without one.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = (ROOT / "derive",)
PACKAGES = ("sympy", "black")  # SymPy prints the formulas; black lays out the torch excerpts
FORMAT = "backgen show cache 1"  # bump when what an entry holds changes
MAX_ENTRIES, KEEP_ENTRIES = 512, 384
ENTRY = re.compile(r"^[0-9a-f]{64}\.txt$")
TEMPORARY = re.compile(r"^\.tmp-[0-9a-z_]+\.txt$")

# What an op file may import and name and still be a function of its bytes alone.
PURE_MODULES = {"__future__", "math", "fractions", "textwrap", "itertools", "functools", "typing"}
FRONT_DOOR = {"derive", "derive.language"}
IMPURE_NAMES = {
    "open", "exec", "eval", "compile", "__import__", "input", "breakpoint", "globals", "locals",
    "vars", "getattr", "setattr", "__builtins__", "__file__", "__loader__", "__spec__",
}  # fmt: skip


def self_contained(source: str) -> bool:
    """Whether an op file's ``OP`` can depend on nothing but the file's text: it imports only
    :data:`PURE_MODULES` and ``from derive[.language] import ...``, and names none of
    :data:`IMPURE_NAMES` (file reads, dynamic code, its own location)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False  # the run will say what is wrong; nothing to cache
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(alias.name not in PURE_MODULES for alias in node.names):
                return False
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module not in PURE_MODULES | FRONT_DOOR):
                return False
        elif isinstance(node, ast.Name) and node.id in IMPURE_NAMES:
            return False
        elif isinstance(node, ast.Attribute) and node.attr in IMPURE_NAMES:
            return False
    return True


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def engine_fingerprint() -> str:
    """A hash of the engine's sources, the Python version and the installed printers."""
    h = hashlib.sha256(f"{FORMAT}\n{sys.version}\n".encode())
    for folder in ENGINE:
        for path in _files(folder):
            h.update(f"{path.relative_to(ROOT).as_posix()}\n".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    for package in PACKAGES:  # located, not imported: a hit must not import SymPy
        spec = importlib.util.find_spec(package)
        origin = spec.origin if spec and spec.origin else ""
        stat = os.stat(origin) if origin else None
        h.update(f"{package} {origin} {stat and (stat.st_size, stat.st_mtime_ns)}\n".encode())
    return h.hexdigest()


def cache_folder() -> Path | None:
    """Where entries live, or None when the cache is off."""
    chosen = os.environ.get("BACKGEN_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        return Path(base or Path.home() / ".cache") / "backgen"
    except RuntimeError:  # no home directory to be found
        return None


class ShowCache:
    """Renderings by key; every miss or failure is ``None`` and the caller derives."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._engine: str | None = None

    @classmethod
    def default(cls) -> ShowCache | None:
        folder = cache_folder()
        return cls(folder / "show") if folder is not None else None

    def key(self, path: Path, mode: str, width: int, what: str = "") -> str | None:
        """The entry's name for this op file shown so, or None if it must not be cached."""
        try:
            data = path.read_bytes()
            source = data.decode()
        except (OSError, UnicodeDecodeError):
            return None
        if not self_contained(source):
            return None
        if self._engine is None:
            self._engine = engine_fingerprint()
        shape = f"{mode} {width if mode == 'text' else ''}" + (f" {what}" if what else "")
        h = hashlib.sha256(f"{self._engine}\n{shape}\n{path.as_posix()}\n".encode())
        h.update(hashlib.sha256(data).digest())
        return h.hexdigest()

    def get(self, key: str) -> str | None:
        entry = self.folder / f"{key}.txt"
        try:
            header, _, body = entry.read_text(encoding="utf-8").partition("\n")
        except (OSError, UnicodeDecodeError):
            return None
        if header != f"{FORMAT} {hashlib.sha256(body.encode()).hexdigest()}":
            return None  # damaged or not ours: derive again (put replaces it)
        try:
            os.utime(entry)  # recently used: the last to be pruned
        except OSError:
            pass
        return body

    def put(self, key: str, body: str) -> None:
        text = f"{FORMAT} {hashlib.sha256(body.encode()).hexdigest()}\n{body}"
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".txt", dir=self.folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.folder / f"{key}.txt")
            tmp = None
            self._prune()
        except OSError:
            pass  # a cache that cannot be written is no cache, not an error
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def _prune(self) -> None:
        """Drop the least recently used entries past MAX_ENTRIES, and temporaries a killed run
        left behind a day ago; nothing else in the folder is touched."""
        entries, now = [], time.time()
        for p in self.folder.iterdir():
            if ENTRY.match(p.name):
                entries.append((p.stat().st_mtime, p))
            elif TEMPORARY.match(p.name) and now - p.stat().st_mtime > 86400:
                p.unlink(missing_ok=True)
        if len(entries) > MAX_ENTRIES:
            for _, p in sorted(entries)[: len(entries) - KEEP_ENTRIES]:
                p.unlink(missing_ok=True)
