"""Where a benchmark writes its reports, and which files it may replace.

A report goes into ``--out`` (``runs/bench`` by default) and, for ``python -m bench``, to
``--json``; either may name a folder or a file of the user's own. A file is replaced only where
an earlier benchmark run wrote it and nothing changed it since: each folder's
``.bench-written.json`` holds the sha256 of every report a run wrote there. Checked before the
run (:func:`claim`: a refusal costs a second, not a finished run's results) and again when
writing; each file is written whole to a temporary beside it and moved into place, so an
interrupted write leaves the old report (found by probing: ``--json names.txt`` replaced the
data file with a report, ``--out`` a folder's own ``bench.md``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from train.report import replace_atomically

LEDGER = ".bench-written.json"


class OutputError(ValueError):
    """A report path the benchmark will not write: one line, naming the path."""


def claim(*paths: Path) -> None:
    """Refuse, before any timing, a report path that is a folder, lies under a file, or is a
    file no benchmark run wrote (or one changed since)."""
    for path in map(Path, paths):
        for parent in path.parents:
            if parent.exists() and not parent.is_dir():
                raise OutputError(f"{path}: {parent} is a file, not a folder")
        if path.is_dir():
            raise OutputError(f"{path} is a folder; a report is a file")
        if path.exists() and not _written_here(path):
            raise OutputError(
                f"{path} exists and no benchmark run wrote it: not replaced (move it, or "
                "choose another --out or --json)"
            )


def write(path: Path, data: str | bytes) -> None:
    """``data`` to ``path`` (see :func:`claim`), atomically, recorded in the folder's ledger."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    claim(path)
    raw = data.encode() if isinstance(data, str) else data
    _replace(path, raw)
    ledger = _ledger(path.parent)
    ledger[path.name] = hashlib.sha256(raw).hexdigest()
    _replace(path.parent / LEDGER, (json.dumps(ledger, indent=1, sort_keys=True) + "\n").encode())


def _written_here(path: Path) -> bool:
    digest = _ledger(path.parent).get(path.name)
    return digest is not None and digest == hashlib.sha256(path.read_bytes()).hexdigest()


def _ledger(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / LEDGER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _replace(path: Path, raw: bytes) -> None:
    replace_atomically(path, lambda f: f.write(raw))
