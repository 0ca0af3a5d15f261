"""Which functions the generator draws: the language's own list (the registry once it lands).

Each function's domain is one row here: names in POSITIVE_ARGUMENT only ever get an argument that
is positive by construction. A name the language does not offer is never drawn, so the fuzzer
follows the language as it grows.
"""

from __future__ import annotations

import importlib
from pathlib import Path

# f(x) defined and smooth only for x > 0 (or x > -1): the generator feeds them positive arguments
POSITIVE_ARGUMENT = {"log", "sqrt", "log1p"}
# functions whose value is positive for every real argument (usable as denominators)
POSITIVE_VALUE = {"exp", "cosh", "sigmoid", "softplus"}
# growing fast: nested twice they overflow float64 on ordinary inputs
GROWING = {"exp", "cosh", "sinh", "expm1"}


def registry():
    """derive/functions.py (issue 9's registry) when this checkout has it, else None.

    Looked up in this checkout's derive/: an editable install elsewhere must not leak its own.
    """
    import derive

    if not Path(derive.__file__).with_name("functions.py").is_file():
        return None
    return importlib.import_module("derive.functions")


def available_functions() -> list[str]:
    """The element-wise functions of one argument the op language accepts, sorted."""
    reg = registry()
    if reg is None:
        from derive.language import FUNCTIONS

        return sorted(FUNCTIONS)
    return sorted(n for n, row in reg.FUNCTIONS.items() if getattr(row, "arity", 1) == 1)


def positive_argument() -> set[str]:
    """Functions whose argument must be positive (log, sqrt) or above -1 (log1p)."""
    reg = registry()
    if reg is None:
        return set(POSITIVE_ARGUMENT)
    rows = reg.FUNCTIONS.items()
    return set(POSITIVE_ARGUMENT) | {n for n, r in rows if getattr(r, "domain", "real") != "real"}


def elementwise_extremes() -> tuple[str, ...]:
    """The language's element-wise max/min of two expressions (``maximum``, ``minimum``)."""
    reg = registry()
    if reg is None:
        return ()
    return tuple(sorted(n for n, row in reg.FUNCTIONS.items() if getattr(row, "arity", 1) == 2))


def constants() -> list[str]:
    """Named constants of the language (pi, e), if it has them."""
    reg = registry()
    return sorted(getattr(reg, "CONSTANTS", {})) if reg is not None else []
