"""A log the text adds inside an exp, put back in its exp: ``u exp(a)`` as ``exp(a + log(u))``.

SymPy reads the text's ``exp(x + log(keep) - m)`` as ``keep exp(x - m)``
(:mod:`derive.language.logs`), and the derivation carries that product into every order: a
backward's ``keep exp(x - m) (g - ..)``, a tangent's ``exp(x - m) (keep t_x - keep c)`` with
keep a common factor outside, a second order's ``keep[c] Sum(exp(x[c] + x[c1] - 2 m) ..,
c1)`` with the exps merged inside a sum. Wherever keep = 0 and the exp overflows that is
``0 * inf = nan``; the text's exp is ``exp(-inf) = 0``. The lowering meets each such product
(:func:`logged_exps`, from a product, a sum's terms, a reduction's body) and computes it as the
text does.
"""

from __future__ import annotations

import sympy as sp

from derive.language.logs import logged_factors, logged_key
from derive.lower.context import Context
from derive.symbolic.seeds import given


def logged_exps(cx: Context, e: sp.Mul) -> sp.Expr:
    """``e`` with its factors ``u**c`` whose u the op's text logs inside an exp taken back into
    e's first exp, ``u**c exp(a) = exp(a + c log(u))`` (u >= 0 there: the text's log of it);
    where such a u is a factor of a term of a sum e multiplies instead (SymPy takes common
    factors out: a tangent's ``exp(x - m) (keep t_x - keep c)``), the exp multiplied into
    that sum's terms, each of which this rule then reads; ``e`` itself where neither holds.

    As a product, ``keep exp(x - m)`` is ``0 * inf = nan`` at keep = 0 and x - m > 709, and
    ``u * inf`` where u is tiny; the text's exp is 0, and finite. The exp is built unevaluated
    (evaluated, SymPy would take u out again) and lowered as any call."""
    if not cx.logged:
        return e
    if any(isinstance(f, sp.Mul) for f in e.args):  # a product kept unevaluated, nested
        flat = sp.Mul(*_flat(e), evaluate=False)
        return out if (out := logged_exps(cx, flat)) is not flat else e
    taken = logged_factors(e, cx.logged)
    first = _paired([f for f in e.args if isinstance(f, sp.exp)], taken)
    if first is None:
        return _into_sum(e, logged_factors(e, cx.logged, beside_exp=False))
    if taken:
        inside = sp.exp(sp.Add(first.args[0], *[log for _, log in taken]), evaluate=False)
        rest = [f for f in e.args if f is not first and f not in {f for f, _ in taken}]
        return sp.Mul(inside, *rest, evaluate=False)
    for f in e.args:
        if isinstance(f, sp.Add) and _logged_term(f, cx.logged):
            rest = [r for r in e.args if r is not first and r is not f]
            return sp.Mul(*rest, sp.Add(*[_times(first, t) for t in f.args]))
    return e


def _into_sum(e: sp.Mul, taken: list[tuple[sp.Expr, sp.Expr]]) -> sp.Expr:
    """``e`` with its logged factors taken into the exp of a sum it multiplies, where they
    read none of the sum's bound indices: a second order merges ``exp(x[c] - m) exp(x[c1] -
    m)`` into one exp inside the sum over c1, and ``keep[c]`` stands outside it; or multiplied
    into the terms of an Add it multiplies that hold exps (``keep / S (exp(a) g - ..)``), each
    of which :func:`logged_exps` then reads; ``e`` itself where neither holds."""
    if not taken:
        return e
    for f in e.args:
        if isinstance(f, sp.Add) and f.has(sp.exp):
            factors = {f for f, _ in taken}
            rest = [r for r in e.args if r is not f and r not in factors]
            return sp.Mul(*rest, sp.Add(*[_times(sp.Mul(*factors), t) for t in f.args]))
    sums = [s for s in e.args if isinstance(s, sp.Sum)]
    sums.sort(key=lambda s: _paired(list(sp.Mul.make_args(s.function)), taken, False) is None)
    for s in sums:
        body = sp.Mul.make_args(s.function)
        bound = {lim[0] for lim in s.limits}
        moved = [(f, log) for f, log in taken if not f.free_symbols & bound]
        first = _paired([f for f in body if isinstance(f, sp.exp)], moved)
        if first is None or not moved:
            continue
        inside = sp.exp(sp.Add(first.args[0], *[log for _, log in moved]), evaluate=False)
        summand = sp.Mul(inside, *[f for f in body if f is not first], evaluate=False)
        rest = [f for f in e.args if f is not s and f not in {f for f, _ in moved}]
        return sp.Mul(*rest, sp.Sum(summand, *s.limits), evaluate=False)
    return e


def _flat(e: sp.Mul) -> list[sp.Expr]:
    return [g for f in e.args for g in (_flat(f) if isinstance(f, sp.Mul) else [f])]


def _paired(
    exps: list[sp.Expr], taken: list[tuple[sp.Expr, sp.Expr]], first: bool = True
) -> sp.Expr | None:
    """The exp of ``exps`` the logged factors came out of, as far as indices tell: the first
    whose argument reads every index they read (``keep[n, c]`` beside ``exp(x[n, c1] - m[n])``
    and ``exp(x[n, c] - m[n])`` belongs to the second), else the first (None, ``first``
    False); None for none."""
    exps = [f for f in exps if isinstance(f, sp.exp)]
    wanted = {s for f, _ in taken for i in f.atoms(sp.Indexed) for s in _indices(i)}
    fallback = exps[0] if exps and first else None
    return next((f for f in exps if wanted <= _read_indices(f.args[0])), fallback)


def _indices(read: sp.Indexed) -> set[sp.Symbol]:
    return {s for i in read.indices for s in i.free_symbols}


def _read_indices(e: sp.Expr) -> set[sp.Symbol]:
    """The indices ``e``'s tensor reads subscript with (not the tensors' own names)."""
    return {s for i in e.atoms(sp.Indexed) for s in _indices(i)}


def _times(f: sp.Expr, term: sp.Expr) -> sp.Expr:
    """``f * term``, inside the term where it is given on some cotangents or tangents
    (:mod:`derive.symbolic.seeds`): a missing one's zeros times an exp that overflows are nan."""
    c, rest = term.as_coeff_Mul()
    if isinstance(rest, given):
        return c * given(f * rest.args[0], *rest.args[1:])
    return f * term


def _logged_term(e: sp.Add, logged: frozenset[sp.Expr]) -> bool:
    """Whether a term of the sum ``e`` has a factor :func:`logged_exps` takes into an exp,
    itself or in a sum it multiplies."""
    for term in e.args:
        _, rest = term.as_coeff_Mul()
        for f in sp.Mul.make_args(rest.args[0] if isinstance(rest, given) else term):
            base = f.base if isinstance(f, sp.Pow) and f.exp.is_number else f
            if not base.is_number and logged_key(base) in logged:
                return True
            if isinstance(f, sp.Add) and _logged_term(f, logged):
                return True
    return False
