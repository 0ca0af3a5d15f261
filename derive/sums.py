"""SymPy's Sum bookkeeping, memoised: the derivation asks it of the same sums again and again.

``Sum.free_symbols``: SymPy computes a Sum's free symbols afresh on every call, by
``xreplace``-ing its bound indices through the whole body; a nested Sum repeats that for each
level, and SymPy's assumption queries (``is_number``, ``is_positive`` of a product holding a Sum)
ask it on every new expression. In the attention op's derivation this was a third of the time.
An expression is immutable and hashes by value, so its free symbols are a function of it:
computed once per distinct Sum and kept (a bounded cache). Each caller gets a fresh ``set``, as
SymPy's own code adds to the one it gets.

``Sum(body, *limits)``: every construction (each ``xreplace`` or rename through a sum rebuilds
it) walks the whole body twice looking for ``Piecewise`` (``body.atoms(Piecewise)`` and
``piecewise_fold``'s ``has``), so building a sum nested d deep costs d walks of its body. Those
walks find nothing here: the engine writes conditions as ``where``, never ``Piecewise``. Whether
a body holds a Piecewise is memoised per distinct sub-expression (:func:`has_piecewise`); a body
without one skips the fold, whose result is then the body itself:

    reps = {} -> body.xreplace({}) = body,  piecewise_fold(body) = body  (no Piecewise in body)

so the Sum built is the same. Everything else (a body that holds a Piecewise, an ``Eq``, a sum
of the same kind to denest, a limit that changes variables, no limits) goes to SymPy's own code.
"""

from __future__ import annotations

from functools import lru_cache

from sympy import Basic, Equality, Piecewise, S, sympify
from sympy.concrete import expr_with_limits
from sympy.concrete.expr_with_limits import ExprWithLimits, _process_limits

_computed = ExprWithLimits.free_symbols.fget


@lru_cache(maxsize=1 << 16)
def _free(expr: ExprWithLimits) -> frozenset:
    return frozenset(_computed(expr))


def _free_symbols(self: ExprWithLimits) -> set:
    return set(_free(self))


if getattr(ExprWithLimits.free_symbols, "fget", None) is _computed:
    ExprWithLimits.free_symbols = property(_free_symbols, doc=ExprWithLimits.free_symbols.__doc__)


@lru_cache(maxsize=1 << 16)
def has_piecewise(expr: Basic) -> bool:
    """``expr.has(Piecewise)``, once per distinct sub-expression (the same tree walk: args)."""
    return isinstance(expr, Piecewise) or any(has_piecewise(a) for a in expr.args)


_sympy_common_new = getattr(expr_with_limits._common_new, "__wrapped__", None) or (
    expr_with_limits._common_new
)


def _common_new(cls: type, function: object, *symbols: object, discrete: bool, **assumptions):
    """SymPy's ``_common_new`` (a Sum's or Integral's body and limits, checked), without the
    Piecewise fold where the body holds no Piecewise (see the module's docstring)."""
    body = sympify(function)
    if (
        symbols
        and isinstance(body, Basic)
        and not isinstance(body, Equality)
        and body is not S.NaN
        and type(body) is not cls
        and not has_piecewise(body)
    ):
        limits, orientation = _process_limits(*symbols, discrete=discrete)
        if all(len(limit) != 4 for limit in limits):
            return body, limits, orientation
    return _sympy_common_new(cls, function, *symbols, discrete=discrete, **assumptions)


_common_new.__wrapped__ = _sympy_common_new
expr_with_limits._common_new = _common_new
