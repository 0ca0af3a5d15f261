"""A log the text adds inside an exp, put back in its exp: ``u exp(a)`` as ``exp(a + log(u))``.

SymPy reads the text's ``exp(x + log(keep) - m)`` as ``keep exp(x - m)``
(:mod:`derive.language.logs`), and the derivation carries that product into every order: a
backward's ``keep exp(x - m) (g - ..)``, a tangent's ``exp(x - m) (keep t_x - keep c)`` with
keep a common factor outside, a second order's ``keep[c] Sum(exp(x[c] + x[c1] - 2 m) ..,
c1)`` with the exps merged inside a sum. Wherever keep = 0 and the exp overflows that is
``0 * inf = nan``; the text's exp is ``exp(-inf) = 0``. The lowering meets each such product
(:func:`logged_exps`, from a product, a sum's terms, a reduction's body) and computes it as the
text does, where the exp reads what the text's did besides the log:

    u**c exp(a) = sign(u)**c exp(a + c log|u|)      (exp(a + c log(u)) for u known >= 0)

an identity for every real u (at u = 0 both sides are 0), so a u that is negative somewhere
(logged under a guard, or in a branch SymPy merged with another) keeps its value.
"""

from __future__ import annotations

import sympy as sp

from derive.identities import FORWARD_RULES, rewrite, split_logs
from derive.language.logs import logged_factors, logged_key, read_names
from derive.lower.context import Context
from derive.symbolic.seeds import given


def logged_exps(cx: Context, e: sp.Mul) -> sp.Expr:
    """``e`` with its logged factors (:func:`~derive.language.logs.logged_factors`) taken back
    into the exp beside them that they came out of; where such a factor multiplies no exp
    but a sum of terms that hold exps (SymPy takes common factors out: a tangent's
    ``exp(x - m) (keep t_x - keep c)``, a ``keep / S (exp(a) g - ..)``) or a reduction over
    an exp, it is multiplied into them, each of which this rule then reads; ``e`` itself
    where none of this holds. The exp is built unevaluated (evaluated, SymPy would take u
    out again) and lowered as any call."""
    if not cx.logged:
        return e
    if any(isinstance(f, sp.Mul) for f in e.args):  # a product kept unevaluated, nested
        flat = sp.Mul(*_flat(e), evaluate=False)
        return out if (out := logged_exps(cx, flat)) is not flat else e
    exps = [f for f in e.args if isinstance(f, sp.exp)]
    for first in sorted(exps, key=lambda f: not _covers(f, logged_factors(e, cx.logged, None))):
        taken = logged_factors(e, cx.logged, first)
        if taken:
            return _taken_in(e, first, taken)
    if not exps:
        return _into_sum(e, logged_factors(e, cx.logged, None), cx.logged)
    for f in e.args:
        if isinstance(f, sp.Add) and _logged_term(f, cx.logged):
            first = exps[0]
            rest = [r for r in e.args if r is not first and r is not f]
            return sp.Mul(*rest, sp.Add(*[_times(first, t) for t in f.args]))
    return e


def _taken_in(e: sp.Mul, first: sp.exp, taken: list[tuple[sp.Expr, sp.Expr]]) -> sp.Expr:
    """``e`` with the ``taken`` factors of it in its exp ``first`` (see the module)."""
    added, signs = [], []
    for f, base in taken:
        c = f.exp if isinstance(f, sp.Pow) else sp.S.One
        if base.is_nonnegative:
            added.append(c * _log(base))
        else:
            added.append(c * sp.log(sp.Abs(base)))
            signs.append(sp.sign(base) ** c)
    inside = sp.exp(sp.Add(first.args[0], *added), evaluate=False)
    factors = {f for f, _ in taken}
    # e's factors: a sum's body of one factor, the exp alone, is no Mul, and its args are
    # the exp's argument (fuzz 2300087: F * sum_j exp(b[j]) computed as sum_j exp(b[j] +
    # log F) * b[j], a forward value silently wrong)
    rest = [f for f in sp.Mul.make_args(e) if f is not first and f not in factors]
    return sp.Mul(inside, *signs, *rest, evaluate=False)


def _log(u: sp.Expr) -> sp.Expr:
    """``log(u)``, u >= 0, in a form for range: ``log(sigmoid(z))`` is ``-softplus(-z)``."""
    return rewrite(split_logs(sp.log(u)), FORWARD_RULES)


def _into_sum(e: sp.Mul, taken: list[tuple[sp.Expr, sp.Expr]], logged: dict) -> sp.Expr:
    """``e`` with its logged factors multiplied into the terms of an Add it multiplies that
    hold exps (each of which :func:`logged_exps` then reads), or taken into the exp of a sum
    it multiplies, where they read none of the sum's bound indices: a second order merges
    ``exp(x[c] - m) exp(x[c1] - m)`` into one exp inside the sum over c1, and ``keep[c]``
    stands outside it; ``e`` itself where neither holds."""
    if not taken:
        return e
    for f in e.args:
        if isinstance(f, sp.Add) and f.has(sp.exp):
            factors = {f for f, _ in taken}
            rest = [r for r in e.args if r is not f and r not in factors]
            return sp.Mul(*rest, sp.Add(*[_times(sp.Mul(*factors), t) for t in f.args]))
    sums = [s for s in e.args if isinstance(s, sp.Sum)]
    sums.sort(key=lambda s: not any(_covers(f, taken) for f in sp.Mul.make_args(s.function)))
    for s in sums:
        body = sp.Mul.make_args(s.function)
        bound = {lim[0] for lim in s.limits}
        moved = [(f, base) for f, base in taken if not f.free_symbols & bound]
        exps = [f for f in body if isinstance(f, sp.exp)]
        first = next((f for f in exps if _covers(f, moved)), exps[0] if exps else None)
        if first is not None:
            reads = read_names(first.args[0])
            moved = [
                (f, base) for f, base in moved if any(w <= reads for w in logged[logged_key(base)])
            ]
        if first is None or not moved:
            continue
        summand = _taken_in(sp.Mul(*body, evaluate=False), first, moved)
        rest = [f for f in e.args if f is not s and f not in {f for f, _ in moved}]
        return sp.Mul(*rest, sp.Sum(summand, *s.limits), evaluate=False)
    return e


def _flat(e: sp.Mul) -> list[sp.Expr]:
    return [g for f in e.args for g in (_flat(f) if isinstance(f, sp.Mul) else [f])]


def _covers(exp: sp.Expr, taken: list[tuple[sp.Expr, sp.Expr]]) -> bool:
    """Whether ``exp``'s argument reads every index the ``taken`` factors read: the exp they
    came out of, as far as indices tell (``keep[n, c]`` beside ``exp(x[n, c1] - m[n])`` and
    ``exp(x[n, c] - m[n])`` belongs to the second)."""
    if not isinstance(exp, sp.exp) or not taken:
        return False
    wanted = {s for f, _ in taken for i in f.atoms(sp.Indexed) for s in _indices(i)}
    return wanted <= {s for i in exp.args[0].atoms(sp.Indexed) for s in _indices(i)}


def _indices(read: sp.Indexed) -> set[sp.Symbol]:
    return {s for i in read.indices for s in i.free_symbols}


def _times(f: sp.Expr, term: sp.Expr) -> sp.Expr:
    """``f * term``, inside the term where it is given on some cotangents or tangents
    (:mod:`derive.symbolic.seeds`): a missing one's zeros times an exp that overflows are nan."""
    c, rest = term.as_coeff_Mul()
    if isinstance(rest, given):
        return c * given(f * rest.args[0], *rest.args[1:])
    return f * term


def _logged_term(e: sp.Add, logged: dict) -> bool:
    """Whether a term of the sum ``e`` has a factor :func:`logged_exps` takes into an exp,
    itself or in a sum it multiplies."""
    for term in e.args:
        _, rest = term.as_coeff_Mul()
        for f in sp.Mul.make_args(rest.args[0] if isinstance(rest, given) else term):
            base = f.base if isinstance(f, sp.Pow) and f.exp.is_number else f
            base = base.args[0] if isinstance(base, sp.Abs) else base
            if not base.is_number and logged_key(base) in logged:
                return True
            if isinstance(f, sp.Add) and _logged_term(f, logged):
                return True
    return False
