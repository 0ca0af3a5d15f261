"""Identities for range: rewrites that keep a value finite where the math is, one row each.

Two tables, one engine (:func:`rewrite`: bottom-up, every row tried at every node, to a fixed
point):

- :data:`DEFINITION_RULES` rewrite what an op writes into the registry's stable functions before
  anything is derived, so the backward is derived from the stable form too (the log-sigmoid loss
  written as ``1/(1 + exp(-z))`` derives ``-g sigmoid(-z) / N`` from ``sigmoid``'s own derivative).
- :data:`FORWARD_RULES` rewrite a forward step seen through its canonical form (intermediates
  inlined): ``log(probs)`` of a softmax becomes ``norm_logits - log(counts_sum)``, ``log(s)`` of a
  sigmoid ``-softplus(-z)``, so logits of 1e4 or z = -800 give finite losses.

A row is ``(name, pattern, build)``: SymPy ``Wild``s in the pattern, ``build`` gets the match.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from derive.functions import FLOAT_VALUED, sigmoid, softplus, where

_x = sp.Wild("x")
_r = sp.Wild("r", exclude=[0])
_a, _c = sp.Wild("a", exclude=[0]), sp.Wild("c", exclude=[0])
_p, _q = sp.Wild("p"), sp.Wild("q")
Rule = tuple[str, sp.Expr, Callable[[dict], sp.Expr | None]]  # None: declines the match


def _ratio(r: sp.Expr, x: sp.Expr) -> sp.Expr | None:
    # r must not hide an exp(-x) that the match put there: 2 sigma(z) = (2 e^z) e^-z sigma(z),
    # nor a sigmoid it divided in: 2 e^-w = (2 / sigma(w)) e^-w sigma(w) is no sigmoid ratio
    return None if r.has(sp.exp, sigmoid) else r * sigmoid(x)


def _shifted_softplus(a: sp.Expr, c: sp.Expr, x: sp.Expr) -> sp.Expr | None:
    # log(a + c e^x) = log(a) + softplus(x + log(c) - log(a)), for a, c > 0 only (their logs;
    # log(a) apart, so that a = 1 + e^y is read by the rows again: softplus(y))
    if not (a.is_positive and c.is_positive):
        return None
    return sp.log(a) + softplus(x + sp.log(c) - sp.log(a))


DEFINITION_RULES: list[Rule] = [
    # 1 / (1 + e^-x) -> sigma(x)         (also 1/(1 + e^x) -> sigma(-x))
    ("sigmoid", 1 / (1 + sp.exp(-_x)), lambda m: sigmoid(m[_x])),
    # r e^x sigma(-x) -> r sigma(x)      (r e^x / (1 + e^x), once the row above has fired)
    ("sigmoid-ratio", _r * sp.exp(_x) * sigmoid(-_x), lambda m: _ratio(m[_r], m[_x])),
    # log(a + c e^x) -> log(a) + softplus(x + log(c) - log(a))  (a, c > 0: log(1 + e^x) ->
    # softplus(x); 2 + e^800 overflows; log(e^y + e^x) -> y + softplus(x - y), logsumexp of two)
    (
        "softplus",
        sp.log(_a + _c * sp.exp(_x)),
        lambda m: _shifted_softplus(m[_a], m[_c], m[_x]),
    ),
    # log1p(c e^x) -> softplus(x + log(c))                   (c > 0)
    ("softplus-log1p", log1p(_c * sp.exp(_x)), lambda m: _shifted_softplus(sp.S.One, m[_c], m[_x])),
    # c +- c tanh(x) -> 2c sigma(+-2x)   (1 - tanh(x) is 0 past x = 19 in float64, 2 sigma(-2x)
    # keeps e^-2x; GELU-tanh's 1 + tanh(u))
    ("tanh-as-sigmoid", _q + _c * sp.tanh(_x), lambda m: _tanh_as_sigmoid(m[_q], m[_c], m[_x])),
]


def _tanh_as_sigmoid(q: sp.Expr, c: sp.Expr, x: sp.Expr) -> sp.Expr | None:
    # rest + c + c tanh(x) -> rest + 2c sigma(2x); rest - c + c tanh(x) -> rest - 2c sigma(-2x):
    # c a number and a term of the sum, as 1 + tanh(x) = 2 e^x / (e^x + e^-x) = 2 sigma(2x)
    if not c.is_number:
        return None
    terms = sp.Add.make_args(q)
    if c in terms:
        return q - c + 2 * c * sigmoid(2 * x)
    if -c in terms:
        return q + c - 2 * c * sigmoid(-2 * x)
    return None


def _hyperbolic_ratio(r: sp.Expr, x: sp.Expr, p: sp.Expr, q: sp.Expr) -> sp.Expr | None:
    # sinh(x)**p cosh(x)**q with p > 0 > q: k = min(p, -q) sinh/cosh pairs are tanh(x)**k
    if not (p.is_Integer and q.is_Integer and p > 0 > q) or r.has(sp.sinh(x), sp.cosh(x)):
        return None
    k = min(p, -q)
    return r * sp.tanh(x) ** k * sp.sinh(x) ** (p - k) * sp.cosh(x) ** (q + k)


FORWARD_RULES: list[Rule] = [
    # log(sigma(x)) -> -softplus(-x)     (sigma(-800) underflows to 0; softplus(800) does not)
    ("log-sigmoid", sp.log(sigmoid(_x)), lambda m: -softplus(-m[_x])),
    # log(1 - sigma(x)) -> -softplus(x)
    ("log-one-minus-sigmoid", sp.log(1 - sigmoid(_x)), lambda m: -softplus(m[_x])),
    # rest + softplus(x) - softplus(-x) -> rest + x
    ("softplus-odd-part", _q + softplus(_x) - softplus(-_x), lambda m: m[_q] + m[_x]),
    # log(cosh(x)) -> |x| + softplus(-2|x|) - log(2)   (cosh overflows at |x| > 710 in
    # float64, 89 in float32, where a log-cosh loss is |x| - log 2 and finite; found by probing)
    (
        "log-cosh",
        sp.log(sp.cosh(_x)),
        lambda m: sp.Abs(m[_x]) + softplus(-2 * sp.Abs(m[_x])) - sp.log(2),
    ),
    # r sinh(x) / cosh(x)**2 -> r tanh(x) / cosh(x)   (1/cosh's derivative: at |x| = 450
    # cosh(x)**2 overflows, r sinh(x) may too, and inf / inf is nan; tanh is at most 1)
    (
        "hyperbolic-ratio",
        _r * sp.sinh(_x) ** _p * sp.cosh(_x) ** _q,
        lambda m: _hyperbolic_ratio(m[_r], m[_x], m[_p], m[_q]),
    ),
]


def _log_one_plus(x: sp.Expr) -> sp.Expr | None:
    # log(1 + x) -> log1p(x) only where the 1 is the sum's own constant: SymPy's matcher also
    # reads log(2 + y) as 1 + (1 + y), which gains nothing
    return None if x.as_coeff_Add()[0] != 0 else log1p(x)


def _exp_minus_one(q: sp.Expr, c: sp.Expr, x: sp.Expr) -> sp.Expr | None:
    # rest + c e^x - c -> rest + c expm1(x): -c must be a term of the rest, a number or not
    # (alpha - alpha e^(x/alpha), CELU's kink test: rounded to 0 at |x| < 6e-8, a tie)
    return q + c + c * expm1(x) if -c in sp.Add.make_args(q) else None


# Accuracy rows, applied after the range rows to the forward's code
# (:func:`derive.symbolic.canon.stabilise`) and to each collapsed adjoint
# (:meth:`derive.symbolic.collapse.Collapser.simplified`), never to the definitions the
# derivatives are taken of. 1 + x rounds away x's low bits before the log sees them:
# log(1 + x) in float32 at x = 1e-4 is ~5,000 ulps off (at 1e-8 it is 0), and e^x - 1 cancels
# the same way (an ELU written as exp(x) - 1 was 100% off at |x| < 6e-8, torch's F.elu 0.5 ulp),
# where torch's log1p and expm1 are exact to an ulp. A backward meets the same forms:
# d log(1 - e^-y) = dy / (e^y - 1) was inf at y = 1e-30 where the forward is -69.
ACCURACY_RULES: list[Rule] = [
    ("log1p", sp.log(1 + _x), lambda m: _log_one_plus(m[_x])),
    ("expm1", _q + _c * sp.exp(_x), lambda m: _exp_minus_one(m[_q], m[_c], m[_x])),
    # log(-expm1(x)) -> log1p(-e^x) for x < -log 2 (log(1 - e^x) as Maechler's log1mexp:
    # -expm1(-40) is 1 as a double, so the log was 0 where log1p(-e^-40) keeps -4.2e-18;
    # near 0 expm1 is the exact one)
    ("log1mexp", sp.log(-expm1(_x)), lambda m: _log_one_minus_exp(m[_x])),
    # r e^(jx) / expm1(x)**k -> r (-1 / expm1(-x))**j / expm1(x)**(k - j)  (0 < j <= k: 1 /
    # expm1(x)'s derivatives; past x = 710 e^x and expm1(x) overflow and inf / inf is nan,
    # where e^x / (e^x - 1) = 1 / (1 - e^-x) is at most 1; the second order of log(1 - e^-x)
    # and e^(2x) / expm1(x)**2 in e^x / expm1(x)'s gradient, found by probing)
    ("exp-over-expm1", _r * expm1(_x) ** _p, lambda m: _exp_over_expm1(m[_r], m[_x], m[_p])),
]


def _log_one_minus_exp(x: sp.Expr) -> sp.Expr | None:
    if x.is_number:
        return None
    return where(x > -sp.log(2), sp.log(-expm1(x)), log1p(-sp.exp(x)))


def _exp_over_expm1(r: sp.Expr, x: sp.Expr, p: sp.Expr) -> sp.Expr | None:
    if not (p.is_Integer and p < 0):
        return None
    for f in sp.Mul.make_args(r):
        j = sp.cancel(f.args[0] / x) if isinstance(f, sp.exp) else None
        if j is not None and j.is_Integer and 0 < j <= -p:
            rest = sp.Mul(*[g for g in sp.Mul.make_args(r) if g is not f])
            return rest * (-1 / expm1(-x)) ** j * expm1(x) ** (p + j)
    return None


def read_definition(e: sp.Expr) -> sp.Expr:
    """A definition's right-hand side as the engine reads it: :data:`DEFINITION_RULES`
    applied, then a float coefficient of exactly +-1 dropped (:func:`unit_floats`)."""
    return unit_floats(rewrite(e, DEFINITION_RULES))


def unit_floats(e: sp.Expr) -> sp.Expr:
    """``e`` with each product's coefficient ``1.0`` (or ``-1.0``) dropped where the product
    is a float tensor's anyway: SymPy keeps ``0.5 * 2`` as Float 1.0, never equal to 1, so
    GELU's ``0.5 x (1 + tanh(u))`` read as ``x sigmoid(2u)`` was shown, derived and printed
    with a ``1.0`` (and its derivative a ``2.0``). Kept where every factor may be an int
    tensor's: there the 1.0 makes the product a float."""
    if not isinstance(e, sp.Basic) or not e.has(sp.Float):
        return e
    return e.replace(lambda m: isinstance(m, sp.Mul) and _unit_float(m), _without_unit)


def _unit_float(m: sp.Mul) -> bool:
    coef, rest = m.as_coeff_Mul()
    return coef.is_Float and abs(coef) == 1.0 and any(map(_float_factor, sp.Mul.make_args(rest)))


def _float_factor(f: sp.Expr) -> bool:
    base = f if isinstance(f, sp.exp) else f.as_base_exp()[0]  # exp(a) is E**a to as_base_exp
    if isinstance(base, sp.Indexed):
        return base.base.is_integer is not True
    return isinstance(base, FLOAT_VALUED)


def _without_unit(m: sp.Mul) -> sp.Expr:
    coef, rest = m.as_coeff_Mul()
    return rest if coef > 0 else -rest


def _apply(rules: list[Rule], e: sp.Expr) -> sp.Expr:
    present = _functions(e)
    for _, pattern, build in rules:
        if e.func != pattern.func or not _functions(pattern) <= present:
            continue  # SymPy's matcher is slow on large sums: try only what could match
        for m in _matches(e, pattern):
            # SymPy's matcher may solve for a Wild (r = -z (1 + e^x) / e^x): literal matches only
            if set(m) == pattern.atoms(sp.Wild) and pattern.xreplace(m) == e:
                out = build(m)
                if out is not None and out != e:
                    return out
    return e


def _matches(e: sp.Expr, pattern: sp.Expr) -> Iterator[dict]:
    """The matches of ``pattern`` in ``e`` worth trying. A sum or a product with a rest, ``_q +
    t1 + ..`` or ``_r f1 ..`` (``_q``, ``_r`` a Wild term or factor), is matched part by part:
    each ``ti`` against a term of ``e`` (each ``fi`` against a factor) in turn, every choice,
    the rest being the terms (factors) left. SymPy's matcher, given the whole sum, searches
    its assignments of terms to Wilds itself (seconds on an adjoint's sum of three large
    terms: fuzz 8200315 generated in 19.1 s of CPU with it, 15.5 s without) and returns one,
    so a row that declined it (the exp whose -c is not a term) never saw the exp that would
    do; given a product of ten large factors, it took 60 ms to find ``c exp(x)`` in it (the
    double backward of a masked softmax over exps: 23 s of the minute it derived in)."""
    kind = type(pattern) if isinstance(pattern, (sp.Add, sp.Mul)) else None
    lone = [t for t in pattern.args if isinstance(t, sp.Wild)] if kind else []
    if len(lone) != 1:
        m = _match(e, pattern)
        if m is not None:
            yield m
        return
    parts = [t for t in pattern.args if t is not lone[0]]
    yield from _assigned(kind.make_args(e), parts, lone[0], kind, {}, ())


def _assigned(
    args: tuple, parts: list, rest: sp.Wild, kind: type, m: dict, chosen: tuple[int, ...]
) -> Iterator[dict]:
    """Each way to match ``parts`` in turn to distinct ``args`` (with ``m`` so far, ``chosen``
    the args taken), ``rest`` the ``kind`` (Add or Mul) of the args left."""
    if not parts:  # a product's rest is never 0 (the Wilds' exclude=[0]): SymPy folds a 0
        yield {**m, rest: kind(*[a for k, a in enumerate(args) if k not in chosen])}
        return
    part = parts[0].xreplace(m)
    for k, arg in enumerate(args):
        if k in chosen or not _could_match(arg, part):
            continue
        for found in _matches(arg, part):
            yield from _assigned(args, parts[1:], rest, kind, {**m, **found}, (*chosen, k))


def _match(e: sp.Expr, pattern: sp.Expr) -> dict | None:
    """``e.match(pattern)`` with each Sum opaque: SymPy's matcher does not see past a Sum's
    bound indices (``r sinh(x)`` fails to match when r holds one), so each outermost Sum stands
    as a Dummy while matching and is put back into the match."""
    sums = sorted(e.atoms(sp.Sum), key=sp.default_sort_key)
    if not sums:
        return e.match(pattern)
    hidden = {s: sp.Dummy() for s in sums}
    m = e.xreplace(hidden).match(pattern)
    if m is None:
        return None
    back = {d: s for s, d in hidden.items()}
    return {k: v.xreplace(back) for k, v in m.items()}


def _could_match(term: sp.Expr, part: sp.Expr) -> bool:
    """Whether ``part`` may match ``term`` literally: the same head, but where a Wild factor of
    a product may take the rest (``c exp(x)`` matches ``exp(y)`` with c = 1), and the
    function classes ``part`` calls all in ``term``."""
    if isinstance(part, sp.Wild):
        return True
    wild_factor = isinstance(part, sp.Mul) and any(isinstance(f, sp.Wild) for f in part.args)
    if not wild_factor and _head(part) not in (sp.Wild, _head(term)):
        return False
    return _functions(part) <= _functions(term)


def _head(e: sp.Expr) -> type:
    """The class ``e`` is of, read through a power (``sinh(x)**p`` matches ``sinh(w)`` with p =
    1, ``cosh(w)**-2`` with p = -2): a power's base's; ``exp(x)`` (and SymPy's ``E**x``)
    exp's; a Wild's (or a Wild power's) :class:`sp.Wild`."""
    if isinstance(e, sp.Pow) and e.base is not sp.E:
        e = e.base
    if isinstance(e, sp.Wild):
        return sp.Wild
    return sp.exp if isinstance(e, sp.Pow) else type(e)


@functools.lru_cache(maxsize=1 << 16)
def _functions(e: sp.Basic) -> frozenset[type]:
    """The function classes (exp, log, sigmoid, ...) anywhere in ``e``, once per sub-expression."""
    own = {type(e)} if isinstance(e, sp.Function) else set()
    if isinstance(e, sp.Pow) and e.base is sp.E:
        own.add(sp.exp)
    return frozenset(own).union(*(_functions(a) for a in e.args))


def rewrite(expr: sp.Expr, rules: list[Rule], memo: dict | None = None) -> sp.Expr:
    """Apply ``rules`` bottom-up until none fires (each row strictly simplifies). ``memo``: each
    distinct sub-expression is rewritten once, so a chain's shared subtrees are not walked once
    per occurrence (the adjoint of a chain is a DAG whose tree is exponentially larger)."""
    if not isinstance(expr, sp.Basic) or not expr.args or isinstance(expr, sp.Indexed):
        return expr
    memo = {} if memo is None else memo
    if expr not in memo:
        node = expr.func(*[rewrite(a, rules, memo) for a in expr.args])
        out = _apply(rules, node)
        memo[expr] = node  # a row may keep what it matched as a part (log1mexp's branch)
        memo[expr] = rewrite(out, rules, memo) if out != node else node
    return memo[expr]


def split_logs(expr: sp.Expr) -> sp.Expr:
    """Each ``log`` of a product in ``expr`` written as a sum of logs, where that holds for every
    real value of the factors (SymPy's ``expand_log(force=True)`` splits ``log(x y)`` into
    ``log(x) + log(y)``, NaN where x and y are both negative and the product is not):

        log(exp(a) r)       -> a + log(r)          exp(a) > 0 for real a
        log(c r), c > 0     -> log(c) + log(r)     likewise a factor SymPy knows positive
        log(b**k)           -> k log(b)            the one factor left, k odd or not whole:
                                                   NaN on both sides where b < 0

    ``log(probs)`` of a softmax is ``(logits - maxes) - log(counts_sum)``, finite where probs
    rounds to 0; ``log(x y)`` stays as it is."""
    if not isinstance(expr, sp.Basic) or not expr.has(sp.log):
        return expr
    return expr.replace(lambda e: isinstance(e, sp.log), _split_log)


def _where_defined(e: sp.Expr) -> sp.Expr:
    """``e`` with its real params taken nonzero, for asking its sign and realness only: a
    quotient by a param, ``x / tau``, is not real at tau = 0, but there ``exp(x / tau)`` is
    undefined too, and ``log(exp(a) r) = a + log(r)`` holds wherever either side is defined
    (the entropy of ``softmax(x / tau)``: its log split, finite at logits of 1e4)."""
    params = [s for s in e.free_symbols if s.is_real and not s.is_integer]
    return e.xreplace({s: sp.Dummy(s.name, real=True, nonzero=True) for s in params})


def _exp_term(t: sp.Expr) -> tuple[sp.Expr, sp.Expr] | None:
    """``t = exp(a) r`` with a real and r > 0 (one exp factor): ``(a, r)``, else None."""
    exps = [f for f in sp.Mul.make_args(t) if isinstance(f, sp.exp)]
    if len(exps) != 1 or not _where_defined(exps[0].args[0]).is_extended_real:
        return None
    rest = sp.Mul(*(f for f in sp.Mul.make_args(t) if f is not exps[0]))
    return (exps[0].args[0], rest) if _where_defined(rest).is_positive else None


def _log_weight(a: sp.Expr, r: sp.Expr) -> sp.Expr:
    """``log(exp(a) r)`` as ``a + log(r)``, the log split in turn."""
    return a + (split_logs(sp.log(r)) if r != 1 else 0)


def _log_of_two_exps(e: sp.log) -> sp.Expr | None:
    """``log(exp(a) r + exp(b) s)`` with r, s > 0 as ``A + softplus(B - A)``, A = a + log(r)
    and B = b + log(s): a logaddexp, finite wherever A and B are. Written out, both exps
    underflow at once where a and b are both far below the rest of their rows: the log of a
    mixture of two softmaxes (a Jensen-Shannon divergence's ``log((p + q) / 2)``) was -inf
    there, and ``p (log p - log mid)`` 0 * inf (found by probing). None where the sum is
    not two such terms."""
    terms = [_exp_term(t) for t in sp.Add.make_args(e.args[0])]
    if len(terms) != 2 or None in terms:
        return None
    first, second = (_log_weight(*t) for t in terms)
    return first + softplus(second - first)


def exp_ratios(expr: sp.Expr) -> sp.Expr:
    """Each ``exp(a) / (exp(a) r + exp(b) s)`` in a product, r, s > 0, as
    ``sigmoid(A - B) / r`` (A = a + log(r), B = b + log(s)): the derivative of a log of two
    exp terms (:func:`_log_of_two_exps`) divides by their sum, 0 / 0 where both underflow, and
    the sigmoid is 0 or 1 there."""
    if not isinstance(expr, sp.Basic) or not expr.has(sp.exp):
        return expr
    return expr.replace(lambda e: isinstance(e, sp.Mul), _exp_ratio)


def _exp_ratio(e: sp.Expr) -> sp.Expr:
    """Every ``exp(a) / B`` of ``e`` as a sigmoid, one at a time until none is left: what one
    leaves may be another, ``exp(x) exp(y) / B**2`` is the sigmoid of x times ``exp(y) / B``,
    the sigmoid of y (taken once, that ``exp(y) / B`` was NaN at y = 800 and the Hessian of
    ``2 exp(x) / (2 exp(x) + 3 exp(y))`` 3x off at x = y = 400; found by probing)."""
    while isinstance(e, sp.Mul):
        taken = _one_exp_ratio(e)
        if taken is e:
            break
        e = taken
    return e


def _one_exp_ratio(e: sp.Mul) -> sp.Expr:
    """One ``exp(a) / B`` of ``e`` as a sigmoid (see :func:`exp_ratios`); also a power,
    ``exp(k a + c) / B**n`` (k <= n whole) as ``(exp(a) / B)**k exp(c) / B**(n - k)``: SymPy
    merges the exps of a square, and ``exp(2 x) / B**2`` of a derivative underflowed to 0 at
    x = y = -400 where the sigmoid squared is 1/4 (``exp(x) / (exp(x) + exp(y))``'s gradient
    was 1/2 there; found by probing). ``e`` itself where there is none."""
    factors = list(sp.Mul.make_args(e))
    for k, f in enumerate(factors):
        if not (isinstance(f, sp.Pow) and f.exp.is_Integer and f.exp < 0):
            continue
        if not isinstance(f.base, sp.Add):
            continue
        terms = [_exp_term(t) for t in sp.Add.make_args(f.base)]
        if len(terms) != 2 or None in terms:
            continue
        for j in (0, 1):
            (a, r), (b, s) = terms[j], terms[1 - j]
            for top, g in enumerate(factors):
                if not isinstance(g, sp.exp) or top == k:
                    continue
                taken = _multiple_of(g.args[0], a, -f.exp)
                if taken is None:
                    continue
                n, left = taken
                rest = [h for i, h in enumerate(factors) if i not in (k, top)]
                ratio = sigmoid(_log_weight(a, r) - _log_weight(b, s)) / r
                return sp.Mul(*rest, ratio**n, sp.exp(left), f.base ** (f.exp + n))
    return e


def _multiple_of(e: sp.Expr, a: sp.Expr, most: int) -> tuple[int, sp.Expr] | None:
    """``(n, e - n a)`` for the largest whole n <= ``most`` that takes n copies of ``a`` out of
    the exponent ``e`` with fewer terms left (``2 x`` is 2 copies of x, nothing left); None
    where no n does."""
    if e == a:
        return 1, sp.S.Zero
    size = len(sp.Add.make_args(sp.expand(e)))
    for n in range(int(most), 0, -1):
        left = sp.expand(e - n * a)
        if left == 0 or len(sp.Add.make_args(left)) < size:
            return n, left
    return None


def sigmoid_complements(expr: sp.Expr, terms: bool = False) -> sp.Expr:
    """Each ``c (1 - sigmoid(u))`` that multiplies the whole of ``expr`` as ``c sigmoid(-u)``,
    unless ``sigmoid(u)`` multiplies it too; with ``terms``, one that multiplies a term of it.

    ``1 - sigmoid(u)`` keeps no relative accuracy once sigmoid(u) is near 1: it is 1e-3 off at
    u = 30 (about ``eps e^u``) and 0 past u = 37, where ``sigmoid(-u) = e^-u / (1 + e^-u)`` is
    exact to an ulp. A log's derivative divides the sigmoid out of its own derivative,
    ``d log(sigmoid(u)) = 1 - sigmoid(u)``, and a second log divides by the first, so the
    gradient of ``log(-log(sigmoid(x)))``, ``-(1 - s) / softplus(-x)``, was 0.1% off at x = 30
    and 0 (for -1) past 37 (found by probing; ``F.logsigmoid``'s backward is exact there).

    A factor of the whole adjoint (through products, powers, Sums and the branches of a
    where()) is rewritten: there its relative error is the result's; so is a complement SymPy
    multiplied out there, ``F s - F`` (:func:`_multiplied_out`). A step-by-step adjoint
    (``terms``: stepwise ops and every second order) sums terms that cancel, each from one
    step of the chain (``-log(sigmoid(x))``'s second order was 1e-3 off at x = 30 where its
    first order was exact), so there a term's complement is rewritten too. A collapsed
    adjoint's term keeps its complement: a focal loss's gradient reads ``1 - p`` beside ``p``
    in one term and alone in another, and rewriting one computed the same factor twice. The
    complement beside its sigmoid stays, sigmoid's own derivative ``s (1 - s)`` computed
    from the saved output as torch's sigmoid backward is: written ``sigmoid(-u)`` it would
    cost another pass over u for the ulp that a product already small in relative terms
    carries either way. The forward is computed as the op writes it."""
    if not isinstance(expr, sp.Basic) or not expr.has(sigmoid):
        return expr
    return _complements(expr, frozenset(), terms)


def _complement(e: sp.Expr) -> tuple[sp.Expr, sp.Expr] | None:
    """``e = c (1 - sigmoid(u))``, c a nonzero number, as ``(c, u)``; else None."""
    if not isinstance(e, sp.Add):
        return None
    c, rest = e.as_coeff_Add()
    k, s = rest.as_coeff_Mul()
    return (c, s.args[0]) if c != 0 and k == -c and isinstance(s, sigmoid) else None


def _complements(e: sp.Expr, beside: frozenset, terms: bool) -> sp.Expr:
    """``beside``: the arguments of the sigmoids that multiply ``e`` where it stands."""
    complement = _complement(e)
    if complement is not None:
        c, u = complement
        return e if u in beside else c * sigmoid(-u)
    if isinstance(e, sp.Mul):
        factors = sp.Mul.make_args(e)
        args = []
        for k, f in enumerate(factors):
            others = factors[:k] + factors[k + 1 :]
            near = {s.args[0] for g in others for s in g.atoms(sigmoid)}
            args.append(_complements(f, beside | near, terms))
        return sp.Mul(*args)
    if isinstance(e, sp.Pow):
        return sp.Pow(_complements(e.base, beside, terms), e.exp)
    if isinstance(e, sp.Sum):
        return sp.Sum(_complements(e.function, beside, terms), *e.limits)
    if isinstance(e, where):
        return where(e.args[0], *(_complements(a, beside, terms) for a in e.args[1:]))
    if isinstance(e, sp.Add):
        if terms:
            e = sp.Add(*(_complements(t, beside, terms) for t in e.args))
        return _multiplied_out(e, beside)
    return e


def _multiplied_out(e: sp.Add, beside: frozenset) -> sp.Expr:
    """``e`` with a complement SymPy multiplied out, ``F sigmoid(u) - F`` among its terms, as
    ``-F sigmoid(-u)``: a stepwise second order's adjoint (the derivative of ``-log(sigmoid(x))``
    times its cotangent, expanded beside the other terms) was 1e-3 off at x = 30 (found by
    probing). Where F holds sigmoid(u) itself it is sigmoid's own derivative and stays.

    Only a sum's terms are read as terms: where the rewrite leaves one term, a product, its
    factors are not terms (taken for them, ``-F sigmoid(-u)``'s factor -1 was ``-rest`` for
    ``rest = 1``, and ``softplus(x) - x``'s gradient came out ``g - sigmoid(x)``: the DPO
    loss ``-log(sigmoid(a - b))`` climbed in a; found by probing)."""
    if not isinstance(e, sp.Add):
        return e
    terms = list(e.args)
    for k, t in enumerate(terms):
        for f in sp.Mul.make_args(t):
            if not isinstance(f, sigmoid) or f.args[0] in beside:
                continue
            rest = t / f
            if rest.has(f) or -rest not in terms[:k] + terms[k + 1 :]:
                continue
            j = next(i for i, x in enumerate(terms) if x == -rest and i != k)
            left = [x for i, x in enumerate(terms) if i not in (j, k)]
            return _multiplied_out(sp.Add(*left, -rest * sigmoid(-f.args[0])), beside)
    return e


def _split_log(e: sp.log) -> sp.Expr:
    if isinstance(e.args[0], sp.Add):
        both = _log_of_two_exps(e)
        if both is not None:
            return both
    coef, rest = e.args[0].as_coeff_Mul()
    terms, left = [], []
    if coef.is_positive and coef != 1:
        terms.append(sp.log(coef))
    elif coef != 1:
        left.append(coef)
    for f in sp.Mul.make_args(rest):
        base, power = f.as_base_exp()
        asked = _where_defined(base)
        if isinstance(base, sp.exp) and asked.args[0].is_extended_real:
            terms.append(power * base.args[0])
        elif asked.is_positive and _where_defined(power).is_extended_real:
            terms.append(power * sp.log(base))  # exp(a) is E**a: a split by the param too
        else:
            left.append(f)
    if len(left) == 1:
        base, power = left[0].as_base_exp()
        if power.is_rational and not power.is_even and _where_defined(base).is_extended_real:
            terms.append(power * sp.log(base))  # odd, or not whole (sqrt: NaN below 0 too)
            left = []
    if not terms:
        return e
    return sp.Add(*terms) + (sp.log(sp.Mul(*left)) if left else 0)
