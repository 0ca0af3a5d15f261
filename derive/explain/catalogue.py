"""Which file an OP argument of ``show`` or ``check`` names: a catalogue name or a path.

Standard library only: ``show`` answers from its cache (:mod:`~derive.explain.cache`) before
SymPy is imported, and it has to know the op's file to do so.
"""

from __future__ import annotations

import os
from pathlib import Path

from derive.errors import DerivationError

CHECKOUT = Path(__file__).resolve().parents[2]  # site-packages when installed: no catalogue
CATALOGUE = CHECKOUT / "ops"


class UnknownOp(DerivationError):
    """An OP argument that is neither a catalogue name nor an op file."""


def catalogue() -> dict[str, Path]:
    """The ops ``make generate`` knows: ``{name: file}``; none for an installed backgen (its
    site-packages has no pyproject.toml, and an ``ops`` there would be another package)."""
    if not (CHECKOUT / "pyproject.toml").is_file():
        return {}
    return {p.stem: p for p in sorted(CATALOGUE.glob("*.py"))}


def resolve(op: str) -> Path:
    """A catalogue name or a path; an unknown name lists the names there are."""
    path = Path(op)
    if path.suffix == ".py" or path.exists() or os.sep in op or "/" in op:
        return path
    known = catalogue()
    if not known:
        raise UnknownOp(op, "no such op file, and an installed backgen has no catalogue of names")
    if op not in known:
        names = ", ".join(known)
        raise UnknownOp(op, f"unknown op; the catalogue has: {names} (or give an op file's path)")
    try:  # as make passes it (ops/x.py) when run from the checkout
        return known[op].relative_to(Path.cwd())
    except ValueError:
        return known[op]
