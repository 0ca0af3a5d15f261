"""Which functions the generator draws, and how: read off the language's registry
(:data:`derive.functions.FUNCTIONS`), so the fuzzer follows the language as it grows and keeps
no list of function names of its own.

The order of each answer is part of the fuzzer's reproducibility: a recorded seed draws the same
op only while these lists stay as they are (names sorted; positive-valued ones in the registry's
order, which is the order the generator drew them in before it read the registry).
"""

from __future__ import annotations

from derive.functions import CONSTANTS, FUNCTIONS


def available_functions() -> list[str]:
    """The element-wise functions of one argument the op language accepts, sorted."""
    return sorted(n for n, row in FUNCTIONS.items() if row.arity == 1)


def positive_argument() -> set[str]:
    """Functions whose argument must be positive (log, sqrt) or above -1 (log1p): the generator
    feeds them only expressions positive by construction."""
    return {n for n, row in FUNCTIONS.items() if row.domain != "real"}


def positive_valued() -> tuple[str, ...]:
    """Functions of one argument positive for every real argument (exp, cosh, sigmoid,
    softplus): a positive expression by construction, in the registry's order."""
    return tuple(n for n, row in FUNCTIONS.items() if row.arity == 1 and row.positive_valued)


def fast_growing() -> frozenset[str]:
    """Functions that grow exponentially (exp, cosh, sinh, expm1): never nested in one another,
    so float64 values stay moderate for inputs in [-1.5, 1.5]."""
    return frozenset(n for n, row in FUNCTIONS.items() if row.grows_fast)


def elementwise_extremes() -> tuple[str, ...]:
    """The language's element-wise max/min of two expressions (``maximum``, ``minimum``)."""
    return tuple(sorted(n for n, row in FUNCTIONS.items() if row.arity == 2))


def constants() -> list[str]:
    """Named constants of the language, sorted: e, inf, pi. An ``inf`` leaf outside a where()
    branch is refused by the parser, and :func:`fuzz.ops.case_op` draws again; dropping it
    would change the op of every seed that drew it."""
    return sorted(CONSTANTS)
