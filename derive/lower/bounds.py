"""Sizes compared at generation time: whether ``a <= b`` holds for every size the op admits.

A window's lowering may hand its zero padding to torch's kernel (``conv2d(x, w, padding=P)``)
instead of padding and cropping ``x`` itself, but only where that is provably the same read:
the window must not run past the padding torch adds, and a kernel that checks its shapes
(a weight gradient, a transposed convolution's output padding) must get consistent ones. The
sizes are symbols, so this is a proof, not a test: a derived size is replaced by its definition
(``HO -> floor((H + 2*P - KH)/S) + 1``), a floor by a bound on it, and the rest left to SymPy's
sign rules. What cannot be shown is taken as false (the caller keeps its general form).

The bounds, for an integer ``n`` and a positive integer ``m``::

    n/m - (m - 1)/m  <=  floor(n/m)  <=  n/m

An int param counts as a nonnegative integer (a stride, a dilation, a padding: torch refuses
a negative one), a size as a positive one (as declared).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import sympy as sp

from derive.functions import clamp
from derive.language.argmax import Digits, largest_of


def at_most(
    a: sp.Expr, b: sp.Expr, derived: Mapping[sp.Symbol, sp.Expr], scalars: Collection[str]
) -> bool:
    """``a <= b`` for every size and nonnegative int param, as far as it can be shown."""
    e = _concrete(sp.sympify(a) - sp.sympify(b), derived, scalars)
    if e.is_nonpositive:
        return True
    upper = _upper(e)
    return upper is not None and bool(sp.expand(upper).is_nonpositive)


def equal(
    a: sp.Expr, b: sp.Expr, derived: Mapping[sp.Symbol, sp.Expr], scalars: Collection[str]
) -> bool:
    """``a == b`` for every size and nonnegative int param, as far as it can be shown."""
    return at_most(a, b, derived, scalars) and at_most(b, a, derived, scalars)


def _concrete(
    e: sp.Expr, derived: Mapping[sp.Symbol, sp.Expr], scalars: Collection[str]
) -> sp.Expr:
    """``e`` with derived sizes replaced by their definitions (a definition may name another
    derived size), params by nonnegative integers, expanded, each floor's argument over one
    denominator (equal floors then cancel)."""
    for _ in range(len(derived) + 1):
        replaced = e.xreplace(dict(derived))
        if replaced == e:
            break
        e = replaced
    params = {
        s: sp.Symbol(s.name, integer=True, nonnegative=True)
        for s in e.free_symbols
        if isinstance(s, sp.Symbol) and s.name in scalars and not s.is_positive
    }
    e = sp.expand(e.xreplace(params))
    return sp.expand(e.replace(lambda x: isinstance(x, sp.floor), _canonical_floor))


def _canonical_floor(f: sp.floor) -> sp.Expr:
    return sp.floor(sp.cancel(sp.together(f.args[0])))


def _upper(e: sp.Expr) -> sp.Expr | None:
    """An upper bound of ``e`` without floors: each ``c * floor(y)`` bounded by ``c * y``
    (c >= 0) or ``c`` times floor's lower bound (c <= 0); None where a sign is unknown."""
    bound = sp.S.Zero
    for term in sp.Add.make_args(e):
        floors = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.floor)]
        if not floors:
            bound += term
            continue
        if len(floors) > 1:
            return None
        (f,) = floors
        coef = term / f
        if coef.has(sp.floor) or f.args[0].has(sp.floor):
            return None
        if coef.is_nonnegative:
            bound += coef * f.args[0]
        elif coef.is_nonpositive:
            bound += coef * _floor_lower(f.args[0])
        else:
            return None
    return bound


def _floor_lower(y: sp.Expr) -> sp.Expr:
    """A lower bound of ``floor(y)``: ``(n - m + 1)/m`` for ``y = n/m`` with n an integer and
    m a nonnegative integer (a divisor, so not 0: the module checks it), else ``y - 1``."""
    n, m = sp.fraction(sp.together(y))
    if n.is_integer and m.is_integer and m.is_nonnegative:
        return (n - m + 1) / m
    return y - 1


def interval(
    e: sp.Expr,
    ranges: Mapping[sp.Expr, tuple[sp.Expr, sp.Expr]],
    data: Mapping[str, sp.Expr | Digits],
    derived: Mapping[sp.Symbol, sp.Expr],
    scalars: Collection[str],
) -> tuple[sp.Expr, sp.Expr] | None:
    """Bounds ``(lo, hi)`` of an affine ``e = c_0 + sum_k c_k v_k``: each ``v_k`` an index
    with its range in ``ranges`` or an entry of int data whose values lie in ``0..data[name]``
    (an argmax: the position of a Max over ``0..hi``), a digit of one (:func:`_high`), or an
    index clamped into ``lo..hi`` (:class:`derive.functions.clamp`). A term with ``c_k >= 0``
    adds ``c_k * lo_k`` below and ``c_k * hi_k`` above, one with ``c_k <= 0`` the other way
    round; None where a term is neither (a sign not shown, a variable of unknown range); the
    rest must be sizes and params (``scalars``)."""
    lo, hi = sp.S.Zero, sp.S.Zero
    for term in sp.Add.make_args(sp.expand(e)):
        variables = [
            f
            for f in sp.Mul.make_args(term)
            if f in ranges or _high(f, data) is not None or _held(f)
        ]
        if not variables:
            if term.has(sp.Indexed) or any(s.name not in scalars for s in term.free_symbols):
                return None  # data or an index of unknown range
            lo, hi = lo + term, hi + term
            continue
        if len(variables) > 1:
            return None
        (v,) = variables
        coef = term / v
        if coef.has(sp.Indexed) or any(s.name not in scalars for s in coef.free_symbols):
            return None
        if _held(v):
            v_lo, v_hi = v.args[1:]
        else:
            v_lo, v_hi = ranges[v] if v in ranges else (sp.S.Zero, _high(v, data))
        if at_most(0, coef, derived, scalars):
            lo, hi = lo + coef * v_lo, hi + coef * v_hi
        elif at_most(coef, 0, derived, scalars):
            lo, hi = lo + coef * v_hi, hi + coef * v_lo
        else:
            return None
    return lo, hi


def _high(f: sp.Expr, data: Mapping[str, sp.Expr | Digits]) -> sp.Expr | None:
    """The largest value of ``f``, an entry of int data in ``data`` (0 its least) or a digit of
    one (``floor(a/W)``, ``Mod(a, W)``, an argmax over several indices: each digit lies in its
    index's range, known from the Max, not from the generic ``0 <= Mod(a, W) <= W - 1``)."""
    reads = [r for r in f.atoms(sp.Indexed) if r.base.label.name in data]
    if len(reads) != 1 or not (f == reads[0] or isinstance(f, (sp.floor, sp.Mod))):
        return None
    known = data[reads[0].base.label.name]
    if isinstance(known, Digits):
        return known.high(f, reads[0]) if f != reads[0] else largest_of(known)
    return known if f == reads[0] else None


def _held(f: sp.Expr) -> bool:
    return isinstance(f, clamp)
