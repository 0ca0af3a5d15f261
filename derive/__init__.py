"""backgen's derivation engine: op definitions in, simplified adjoints and torch code out.

Pipeline, one package a stage (no stage imports a later one): language -> symbolic (reverse
mode, simplify, fold) -> lower -> emit; verify and explain read what those made.
"""

from derive.errors import DerivationError
from derive.language import Op

__all__ = ["DerivationError", "Op"]
