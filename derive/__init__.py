"""backgen's derivation engine: op definitions in, simplified adjoints and torch code out.

Pipeline (no stage imports a later one): language -> reverse -> simplify -> fold -> lower -> emit.
"""

from derive.errors import DerivationError
from derive.language import Op

__all__ = ["DerivationError", "Op"]
