"""SymPy's ``Sum.free_symbols``, memoised: the derivation asks it of the same sums again and again.

SymPy computes a Sum's free symbols afresh on every call, by ``xreplace``-ing its bound indices
through the whole body; a nested Sum repeats that for each level, and SymPy's assumption queries
(``is_number``, ``is_positive`` of a product holding a Sum) ask it on every new expression. In the
attention op's derivation this was a third of the time. An expression is immutable and hashes by
value, so its free symbols are a function of it: computed once per distinct Sum and kept (a
bounded cache). Each caller gets a fresh ``set``, as SymPy's own code adds to the one it gets.
"""

from __future__ import annotations

from functools import lru_cache

from sympy.concrete.expr_with_limits import ExprWithLimits

_computed = ExprWithLimits.free_symbols.fget


@lru_cache(maxsize=1 << 16)
def _free(expr: ExprWithLimits) -> frozenset:
    return frozenset(_computed(expr))


def _free_symbols(self: ExprWithLimits) -> set:
    return set(_free(self))


if getattr(ExprWithLimits.free_symbols, "fget", None) is _computed:
    ExprWithLimits.free_symbols = property(_free_symbols, doc=ExprWithLimits.free_symbols.__doc__)
