"""backgen's derivation engine: op definitions in, simplified adjoints and torch code out.

Pipeline, one package a stage (no stage imports a later one): language -> symbolic (reverse
mode, simplify, fold) -> lower -> emit; verify and explain read what those made.

``Op`` is imported on first use (PEP 562): ``python -m derive show`` answers a cached op
without importing SymPy, which ``derive.language`` needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from derive.errors import DerivationError

if TYPE_CHECKING:
    from derive.language import Op

__all__ = ["DerivationError", "Op"]


def __getattr__(name: str) -> object:
    if name == "Op":
        from derive.language import Op

        return Op
    raise AttributeError(f"module 'derive' has no attribute {name!r}")
