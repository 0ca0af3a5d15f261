"""Lowering of arithmetic: sums of terms, products, powers and calls of the function registry
become element-wise IR nodes (:class:`~derive.ir.nodes.Map`: broadcast torch ops, python on
numbers).

In: ``Add``, ``Mul``, ``Pow``, function and ``Heaviside`` nodes and the lowering's context; out:
an IR node. A product multiplies its small factors first (each full-size product is a pass over
the tensor) and folds python numbers into one operation; a node a fusion matches
(:mod:`derive.lower.fusions`) becomes the fused node instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection

import sympy as sp

from derive.errors import DerivationError
from derive.functions import BY_NODE, Function, heaviside_code, where
from derive.ir import nodes as ir
from derive.ir.printer import ADD_SCALED
from derive.language import Definition, ReduceMax
from derive.lower.context import Context
from derive.lower.fusions import fuse
from derive.lower.logged import logged_exps
from derive.lower.select import given_value
from derive.lower.value import align, as_gate, is_gate, number_scale, ordered_terms, plain, union
from derive.symbolic.indices import free_indices, without
from derive.symbolic.seeds import given


def add(cx: Context, e: sp.Add, order: list[sp.Symbol]) -> ir.Node:
    if cx.logged:  # before a fusion takes a term's product apart (addcmul(acc, a exp, u))
        terms = [logged_exps(cx, t) if isinstance(t, sp.Mul) else t for t in e.args]
        if any(t is not u for t, u in zip(terms, e.args, strict=True)):
            return cx.value(sp.Add(*terms), order)
    if any(isinstance(t, given) for t in e.args):
        return _accumulated(cx, e, order)
    fused = fuse(cx, e, order)
    if fused is not None:
        return fused
    scope = cx.scope(order)
    large = large_terms(e)
    groups = written_terms(cx, e)
    if not groups:
        groups = [(sp.S.One, g) for g in ([large] if large else shifted_terms(cx, e))]
    if groups:  # each added first, as one sum of its own (lowered as any sum), then the rest
        rest = sp.Add(*[t for t in e.args if not any(t in g for _, g in groups)])
        leading = [_group(cx, scale, g, order) for scale, g in groups]
        terms = ordered_terms(rest) if rest != 0 else []
    else:
        leading, terms = [], ordered_terms(e)
        # a scaled first term gives way to an unscaled tensor term: it rides in that one's add
        plain_terms = [t for t in terms if not scope.scalar(t) and _scaled(t, scope) is None]
        if plain_terms and _scaled(terms[0], scope) is not None:
            terms = [plain_terms[0]] + [t for t in terms if t is not plain_terms[0]]
    first = [cx.value(t, order) for t in terms]  # every term lowered once, for the axes
    # sibling sums stay a + b: stacked_siblings reads contractions as one stacked matmul
    contractions = sum(t.has(sp.Sum) for t in terms) > 1
    axes = union([v.axes for _, v in leading] + [v.axes for v in first], order)
    if leading:
        sign, acc = leading[0]
        acc = align(acc if sign > 0 else ir.Neg(acc, axes=acc.axes), axes)
        for sign, value in leading[1:]:  # a group is one operand: (a - b) + (c - d)
            acc = ir.Binary("+" if sign > 0 else "-", acc, align(value, axes), axes=axes)
    else:
        acc, terms = align(first[0], axes), terms[1:]
    for term in terms:  # a - b rather than a + -b: the negated term lowered again
        scaled = _scaled(term, scope) if not (acc.scalar or contractions) else None
        if scaled is not None:  # r + c * t -> _add_scaled(r, t, c): torch.add's alpha, eager
            coef, rest = scaled
            alpha = ir.Number(coef) if coef.is_Number else _python_number(cx, coef)
            value = align(cx.value(rest, order), axes)
            acc = ir.Apply(ADD_SCALED + "({0}, {1}, {2})", (acc, value, alpha), axes=axes)
            continue
        minus = term.could_extract_minus_sign()
        value = align(cx.value(-term if minus else term, order), axes)
        acc = ir.Binary("-" if minus else "+", acc, value, axes=axes)
    return acc


def _group(cx: Context, scale: sp.Expr, terms: list, order: list) -> tuple[int, ir.Node]:
    """A sum added as one, ``scale * (written parts)``: ``(sign, |scale| * (parts))``, the
    parts' own sum lowered first and scaled once (``3 (a - b)``, not ``3 a - 3 b``: each
    product would round before the difference)."""
    if abs(scale) == 1:
        return int(scale), cx.value(sp.Add(*[t * scale for t in terms]), order)
    inner = cx.value(sp.Add(*[t / scale for t in terms]), order)
    scaled = ir.Binary("*", inner, ir.Number(abs(scale)), axes=inner.axes)
    return (1 if scale > 0 else -1), scaled


# RANGE: SymPy multiplies a number into a sum, c (1 - keep) = c - c keep, so an additive mask
# written x + (1 - keep) * -1e30 is x - 1e30 + 1e30 keep: added in that order, x is lost in
# 1e30's rounding where keep = 1 (the whole row off, found by probing; 1e-8 relative at a
# mask of 1e9), where the sum as written is x + 0. The number and the terms scaled like it
# are added first: their own sum is exactly 0 or the mask's value, and x comes onto that.
LARGE_NUMBER = 2**10


def large_terms(e: sp.Add) -> list[sp.Expr]:
    """The number term of ``e`` past :data:`LARGE_NUMBER` and the terms whose coefficient
    is at least half its size, where there are such terms besides it and others besides
    them; else []."""
    numbers = [t for t in e.args if t.is_Number]
    if len(numbers) != 1 or abs(numbers[0]) < LARGE_NUMBER:
        return []
    bound = abs(numbers[0]) / 2
    large = [t for t in e.args if abs(t.as_coeff_Mul()[0]) >= bound]
    return large if 1 < len(large) < len(e.args) else []


# RANGE: a log-softmax written in one line, ``x - m - log(S)`` with m = Max(x), is exact in x's
# shift (F.log_softmax is), but added as SymPy orders it, ``x - log(S) - m``, the first sum
# rounds at x's magnitude: 200 ulps off at logits of 800, 1e-6 relative at 1e10 (found by
# probing; the catalogue's log_softmax double backward computed its output so). Near its
# maximum, ``x - m`` is exact (Sterbenz), so a sum adds each shift first.
def shifted_terms(cx: Context, e: sp.Add) -> list[list[sp.Expr]]:
    """The terms of ``e`` that a Max of the forward shifts, one list per Max read: ``c m[..]``
    and the terms of opposite sign that read a tensor it is the maximum of (``d x[..]``),
    where a term besides them is left; else []."""
    names = {t: _tensor_name(t.as_coeff_Mul()[1]) for t in e.args}
    groups, taken = [], set()
    for t in e.args:
        if names[t] not in cx.maxima:
            continue
        sign = t.as_coeff_Mul()[0].is_negative
        partners = [
            u
            for u in e.args
            if u not in taken
            and names[u] in cx.maxima[names[t]]
            and u.as_coeff_Mul()[0].is_negative != sign
        ]
        if partners and len(taken) + len(partners) + 1 < len(e.args):
            groups.append([t, *partners])
            taken |= {t, *partners}
    return groups


def written_order(sums: tuple[sp.Expr, ...]) -> tuple[sp.Expr, ...]:
    """The op's written sums (:func:`derive.language.parse.written_sums`), the largest first:
    a sum holding a written one and its parts adds the written one first, and the parts
    inside it, as the text nests them."""
    return tuple(sorted(sums, key=lambda s: -len(s.args)))


def written_terms(cx: Context, e: sp.Add) -> list[tuple[sp.Expr, list[sp.Expr]]]:
    """The terms of ``e`` that a sum of the op's text adds as one, scaled by one number
    (``2*(a - b) + c`` is ``2 a - 2 b + c`` to SymPy), as ``(scale, terms)``, one per written
    sum, no term twice; [] where no written sum is a part of ``e`` (a whole ``e`` is no part
    of itself)."""
    if not cx.sums:
        return []
    left = {t.as_coeff_Mul()[1]: t for t in e.args}  # a term by its part without its number
    groups = []
    for written in cx.sums:
        if len(written.args) >= len(e.args) or len(written.args) > len(left):
            continue
        parts = [t.as_coeff_Mul() for t in written.args]
        found = [left.get(rest) for _, rest in parts]
        if None in found:
            continue
        scale = {t.as_coeff_Mul()[0] / c for t, (c, _) in zip(found, parts, strict=True)}
        if len(scale) == 1:
            groups.append((scale.pop(), found))
            for _, rest in parts:
                del left[rest]
    return groups


def _accumulated(cx: Context, e: sp.Add, order: list[sp.Symbol]) -> ir.Node:
    """A sum with given terms (:mod:`derive.symbolic.seeds`), each added onto the sum before it
    where its cotangents were given, one statement a term::

        acc = rest
        acc_1 = torch.addcmul(acc, b, c) if present[1] else acc

    ``acc + T`` is lowered as any sum, so its fusions stand (a product T rides in one addcmul
    onto acc, as in the whole sum), and with every cotangent given the kernels are the whole
    sum's. Without ungiven terms the sum starts from a given term that is no product (a
    product rides best onto another), of the most axes. A term wider than what comes before
    it is added as ``(T if present[k] else zeros)``."""
    terms = [t for t in e.args if isinstance(t, given)]
    rest = sp.Add(*[t for t in e.args if not isinstance(t, given)])
    if rest == 0:
        terms.sort(key=lambda t: (-len(free_indices(t)), isinstance(t.args[0], sp.Mul)))
        acc = given_value(cx, terms.pop(0), order)
    else:
        acc = cx.value(rest, order)
    for term in terms:
        if acc.scalar or not free_indices(term.args[0]) <= set(acc.axes):
            acc = _plus(acc, given_value(cx, term, order), order)
            continue
        before = acc if isinstance(acc, ir.Ref) else ir.Ref(cx.fresh("acc"), axes=acc.axes)
        if before is not acc:
            cx.emit(ir.Assign((before.name,), acc))
        label = cx.alias(before.name, before)  # what the sum below reads acc as
        read = (
            sp.IndexedBase(label, shape=tuple(cx.sizes[a] for a in acc.axes), real=True)[acc.axes]
            if acc.axes
            else sp.Symbol(label, real=True)
        )
        whole = cx.value(read + term.args[0], order)
        acc = ir.Select(ir.Given(term.positions), whole, align(before, whole.axes), axes=whole.axes)
    return acc


def _plus(a: ir.Node, b: ir.Node, order: list[sp.Symbol]) -> ir.Node:
    axes = union([a.axes, b.axes], order)
    return ir.Binary("+", align(a, axes), align(b, axes), axes=axes)


def _python_number(cx: Context, c: sp.Expr) -> ir.Node:
    """A python-number expression as written by hand: ``1 / N``, not ``N ** (-1)``."""
    num, den = sp.fraction(c)
    if den == 1:
        return cx.value(c, [])
    top = cx.value(num, [])
    return ir.Binary("/", top, cx.value(den, []))


def _scaled(term: sp.Expr, scope) -> tuple[sp.Expr, sp.Expr] | None:
    """``term = c * t``: a python number c other than 1 and -1 (a size or a param in it) times
    tensors t, or None. Added as the module's ``_add_scaled(r, t, c)``: eagerly
    ``torch.add(r, t, alpha=c)``, the scale riding in the add; under torch.compile ``r + t *
    c``, since Inductor's add-of-a-matmul pattern drops the alpha (the template's helper)."""
    coef, rest = term.as_coeff_Mul()
    factors = sp.Mul.make_args(rest)
    coef *= sp.Mul(*[f for f in factors if scope.scalar(f)])
    tensors = sp.Mul(*[f for f in factors if not scope.scalar(f)])
    if coef in (1, -1) or scope.scalar(tensors) or not coef.is_real:
        return None
    return coef, tensors


def mul(cx: Context, e: sp.Mul, order: list[sp.Symbol]) -> ir.Node:
    logged = logged_exps(cx, e)
    if logged is not e:
        return cx.value(logged, order)
    merged = powers_over_their_base(e)
    if merged is not e:
        return cx.value(merged, order)
    split = exps_over_their_sums(e)
    if split is not e:
        return cx.value(split, order)
    fused = fuse(cx, e, order)
    if fused is not None:
        return fused
    gated = _gated(cx, e)
    if gated is not None:
        return cx.spread(e, cx.value(gated, order), order)
    coef, num, den = _factors(cx, e, order)
    if all(v.scalar for v in num + den):
        scale, value = None, product(num, den, order, None)
    else:
        scale = number_scale([v for v in num if v.scalar], [v for v in den if v.scalar], coef < 0)
        tensors = [v for v in num if not v.scalar], [v for v in den if not v.scalar]
        value = product(*tensors, order, scale)
    if coef < 0 and scale is None:  # unary minus on the first (smallest) factor: no extra pass
        return ir.Neg(value, axes=value.axes)
    return value


# RANGE: d(B**g)/du = g B**g B'/B, and SymPy keeps the B**g and the 1/B apart where the
# divisor is written as another multiple of B (p - 1 against (1 - p)**g, e_y - S against
# (1 - e_y / S)**g): at B = 0 (a confident prediction, p rounding to 1 in a focal loss) that
# is 0 / 0 = nan, where the derivative g B**(g - 1) B' is finite (0 for g > 1).
def powers_over_their_base(e: sp.Mul) -> sp.Expr:
    """``e`` with each power ``B**g`` of a sum B merged with a divisor ``D = q B`` (q a
    polynomial: ``D / B`` cancels to no quotient): ``B**g / D**n = B**(g - n) / q**n``, into
    the terms of an Add factor that hold such a divisor (the power distributed over them,
    each term merged). ``e`` itself where there is none."""
    factors = list(sp.Mul.make_args(e))
    for k, power in enumerate(factors):
        taken = _took_its_factors(power, factors[:k] + factors[k + 1 :])
        if taken is not None:
            return taken
        if not _summed_power(power):
            continue
        rest = factors[:k] + factors[k + 1 :]
        for j, f in enumerate(rest):
            merged = _over_base(f, power)
            if merged is not None:
                return sp.Mul(*rest[:j], merged, *rest[j + 1 :])
        for j, f in enumerate(rest):
            if isinstance(f, sp.Add) and any(_holds_divisor(t, power.base) for t in f.args):
                spread = sp.Add(*[powers_over_their_base(power * t) for t in f.args])
                return sp.Mul(*rest[:j], spread, *rest[j + 1 :])
    return e


# RANGE: SymPy writes exp(a) exp(b) as exp(a + b), and a quotient rule's adjoint of a sum of
# exps holds one: d(exp(l) / S) / dy[w] = -exp(l) exp(y[w]) / S**2 with S = Sum(exp(y[w]), w),
# lowered as exp(l + y) / S / S. exp(l + y) overflows (l and y near 450: exp(900)) where
# exp(y) / S <= 1 and exp(l) / S do not, and the running product had underflowed to 0: 0 * inf
# = nan, where autograd's chain order, (g exp(l) / S**2) exp(y), is finite (fuzz --range
# --powers 1179003). So the exp's terms that are a term of a divisor's sum are taken out as
# that exp over that sum, a ratio of at most 1 (:func:`at_most_one`), multiplied first.
def exps_over_their_sums(e: sp.Mul) -> sp.Expr:
    """``e`` with ``exp(t + r) / S**k`` written ``(exp(t) / S) exp(r) / S**(k - 1)``, unevaluated
    (SymPy would merge the exps again), where ``S = Sum(exp(u), w..)`` and t is u at some w;
    ``e`` itself where no exp of a sum of terms has such a divisor."""
    coef, rest = e.as_coeff_Mul()
    factors = list(sp.Mul.make_args(rest))
    divisors = [
        (j, d)
        for j, d in enumerate(factors)
        if isinstance(d, sp.Pow) and d.exp.is_Integer and d.exp < 0
    ]
    for k, f in enumerate(factors):
        for j, d in divisors:
            if j == k:
                continue
            found = _exp_taking(f, d.base)
            if found is None:
                continue
            part, left = found
            others = [x for i, x in enumerate(factors) if i not in (k, j)]
            if d.exp < -1:
                others.append(d.base ** (d.exp + 1))
            ratio = sp.Mul(sp.exp(part), sp.Pow(d.base, -1), evaluate=False)
            lead = [coef] if coef != 1 else []  # a number first, where as_coeff_Mul reads it
            return sp.Mul(*lead, ratio, left, *others, evaluate=False)
    return e


def _exp_taking(f: sp.Expr, s: sp.Expr) -> tuple[sp.Expr, sp.Expr] | None:
    """``(t, f / exp(t))`` where ``f`` is ``exp(t + r)``, or a sum whose body multiplies one
    and t reads none of its bound indices (the scatter of a quotient rule: exp(y[X[j]]) taken
    out of a sum over the other axes), and exp(t) is a term of the sum of exps ``s``."""
    if isinstance(f, sp.exp) and isinstance(f.args[0], sp.Add):
        part = _summand_in(f.args[0], s)
        return None if part is None else (part, sp.exp(f.args[0] - part))
    if not isinstance(f, sp.Sum):
        return None
    bound = {lim[0] for lim in f.limits}
    body = list(sp.Mul.make_args(f.function))
    for k, g in enumerate(body):
        if isinstance(g, sp.exp) and isinstance(g.args[0], sp.Add):
            part = _summand_in(g.args[0], s)
            if part is not None and not part.free_symbols & bound:
                inner = sp.Mul(*body[:k], sp.exp(g.args[0] - part), *body[k + 1 :])
                return part, f.func(inner, *f.limits)
    return None


def _summand_in(exponent: sp.Add, s: sp.Expr) -> sp.Expr | None:
    """The part of ``exponent`` (some of its terms, not all) that is the exponent of a term of
    ``s``, a sum of exps; None if no part is."""
    if not (isinstance(s, sp.Sum) and isinstance(s.function, sp.exp)):
        return None
    n = len(sp.Add.make_args(s.function.args[0]))
    terms = exponent.args
    if n >= len(terms) or len(terms) > 8:
        return None
    for chosen in itertools.combinations(terms, n):
        if _summand_of(sp.Add(*chosen), s):
            return sp.Add(*chosen)
    return None


def _summand_of(t: sp.Expr, s: sp.Sum) -> bool:
    """Whether ``exp(t)`` is a term of ``s = Sum(exp(u), w..)``: t is u at some w."""
    wilds = {lim[0]: sp.Wild(f"_bound{k}") for k, lim in enumerate(s.limits)}
    pattern = s.function.args[0].xreplace(wilds)
    found = t.match(pattern)
    return found is not None and pattern.xreplace(found) == t


def _is_ratio(f: sp.Expr) -> bool:
    """An exp over a sum that holds it, as :func:`exps_over_their_sums` writes it."""
    if not (isinstance(f, sp.Mul) and len(f.args) == 2):
        return False
    num, den = sorted(f.args, key=lambda a: isinstance(a, sp.Pow))
    return (
        isinstance(num, sp.exp)
        and isinstance(den, sp.Pow)
        and den.exp == -1
        and isinstance(den.base, sp.Sum)
        and isinstance(den.base.function, sp.exp)
        and _summand_of(num.args[0], den.base)
    )


def _took_its_factors(power: sp.Expr, rest: list[sp.Expr]) -> sp.Expr | None:
    """``B**a f1 .. fk r`` as ``B**(a + 1) r / c`` where ``B = c f1 .. fk`` (c a number) is a
    product whose every factor ``rest`` holds; None where it does not.

    The derivative of ``(c b)**g`` is ``g (c b)**(g - 1) c b'``, and where ``b'`` holds b
    itself (a sigmoid's ``b (1 - b)``, an exp) SymPy keeps ``(c b)**(g - 1)`` apart from that
    b: inf * 0 where b underflows, at g < 1 (``(1 - tanh(x))**g``, read ``(2 sigmoid(-2x))**g``,
    at x = 800), where the merged ``(c b)**g`` is 0. Taken whole, the power keeps the base the
    op wrote (spread, ``c**g b**g`` overflows in float32 at exponents past 127 where
    ``(c b)**g`` need not)."""
    if not (isinstance(power, sp.Pow) and isinstance(power.base, sp.Mul)):
        return None
    if power.exp.is_Integer:
        return None
    coef, product = power.base.as_coeff_Mul()
    parts = [f.as_base_exp() for f in sp.Mul.make_args(product)]
    left = [f.as_base_exp() for f in rest]
    for base, k in parts:
        at = next(
            (i for i, (b, m) in enumerate(left) if b == base and (m - k).is_nonnegative), None
        )
        if at is None or not (left[at][1] - k).is_Integer:
            return None
        left[at] = (base, left[at][1] - k)
    return sp.Mul(*[b**m for b, m in left], power.base ** (power.exp + 1)) / coef


def _summed_power(f: sp.Expr) -> bool:
    """A power of a sum, ``(1 - p)**gamma``, its exponent not known negative."""
    return isinstance(f, sp.Pow) and isinstance(f.base, sp.Add) and not f.exp.is_negative


def _quotient(d: sp.Expr, base: sp.Expr) -> sp.Expr | None:
    """q where ``d = q base`` and q holds no quotient (``e_y - S = -S (1 - e_y / S)``)."""
    if not isinstance(d, sp.Add):
        return None
    q = sp.cancel(d / base)
    return q if q != 0 and sp.fraction(q)[1] == 1 else None


def _over_base(f: sp.Expr, power: sp.Pow) -> sp.Expr | None:
    """``power / D**n`` merged, where ``f = D**-n`` and D is a multiple of the power's base."""
    if not (isinstance(f, sp.Pow) and f.exp.is_Integer and f.exp < 0):
        return None
    q = _quotient(f.base, power.base)
    if q is None:
        return None
    return power.base ** (power.exp + f.exp) * q**f.exp


def _holds_divisor(t: sp.Expr, base: sp.Expr) -> bool:
    """A term with a divisor that is a multiple of ``base``, at its top or in an Add in it."""
    for f in sp.Mul.make_args(t):
        if isinstance(f, sp.Pow) and f.exp.is_Integer and f.exp < 0:
            if _quotient(f.base, base) is not None:
                return True
        elif isinstance(f, sp.Add) and any(_holds_divisor(u, base) for u in f.args):
            return True
    return False


def _factors(cx: Context, e: sp.Mul, order: list[sp.Symbol]) -> tuple[sp.Expr, list, list]:
    """``e = coef * prod(num) / prod(den)``, the factors lowered, coef's sign aside (a
    rational's denominator, 1/3 x, is a python-number factor of den)."""
    coef, rest = e.as_coeff_Mul()
    num, den = [], []
    constant = sp.Mul(*[f for f in sp.Mul.make_args(rest) if f.is_number])
    if constant != 1:  # 2 sqrt(2)/sqrt(pi): one float, rounded once, no arithmetic at run time
        constant, coef = abs(coef) * constant, sp.sign(coef)
        num.append(cx.value(constant, order))
    factors = [f for f in sp.Mul.make_args(rest) if not f.is_number]
    if len(factors) > 2:  # at most 1 first (see at_most_one); two factors commute exactly
        factors.sort(key=lambda f: not at_most_one(cx, f))  # stable: else SymPy's order
    for f in factors:
        if isinstance(f, sp.Pow) and f.exp.is_number and f.exp < 0:
            den.extend(_divisors(cx, f.base, -f.exp, order))
        else:
            num.append(cx.value(f, order))
    if coef.is_Rational and coef.q != 1:
        den.append(ir.Number(coef.q))
        coef = sp.Integer(coef.p)
    if coef.is_Float and abs(coef) == 1.0:  # 0.5 * 2 is Float 1.0, which SymPy keeps != 1
        coef = sp.Integer(int(coef))
    if abs(coef) != 1:
        num.insert(0, ir.Number(abs(coef)))
    return coef, num, den


# RANGE: a product multiplies the factors known to be at most 1 first, among those of one rank
# (product() takes them rank by rank, in this order): a softmax's numerator exp(a - max a)
# underflows to 0 where its adjoint and the exponent's derivative are both large, and written
# as SymPy orders it, ``(g m) * exp(p) * exp(W - m)`` formed (g m) exp(p) = inf first, inf * 0
# = nan (fuzz --range --powers 1044206: g m and exp(p) near 1e180), where autograd's chain
# order, ``(g m exp(W - m)) * exp(p)``, is 0. Multiplied by a factor of at most 1, a finite
# running product stays finite, and one that is 0 stays 0 (the rest are finite factors).
def at_most_one(cx: Context, f: sp.Expr) -> bool:
    """Whether ``f`` is an exp shifted by a Max reduction, ``exp(a - c m[..])`` with c > 0,
    or a read of a tensor the forward defines so (:func:`shifted_maxima`): at most 1 wherever
    the maximum is the one over ``a`` (a heuristic for the order only: an exp shifted by
    another tensor's maximum is a factor like any other)."""
    if isinstance(f, sp.exp):
        return _shifted(f, cx.maxima)
    return _tensor_name(f) in cx.shifted or _is_ratio(f)


def shifted_maxima(steps: list) -> tuple[dict[str, frozenset[str]], set[str]]:
    """The Max reductions among the forward's ``steps``, each with the tensors it reads, and
    the tensors defined as an exp shifted by one of them (``e[s] = exp(a[s] - m)``,
    ``m = Max(a[s], s)``)."""
    maxima: dict[str, frozenset[str]] = {}
    shifted: set[str] = set()
    for step in steps:
        if not isinstance(step, Definition):
            continue
        if isinstance(step.body, ReduceMax):
            maxima[step.name] = frozenset(i.base.label.name for i in step.body.atoms(sp.Indexed))
        elif isinstance(step.body, sp.exp) and _shifted(step.body, maxima):
            shifted.add(step.name)
    return maxima, shifted


def _shifted(e: sp.exp, maxima: Collection[str]) -> bool:
    for term in sp.Add.make_args(e.args[0]):
        coef, rest = term.as_coeff_Mul()
        if coef.is_negative and _tensor_name(rest) in maxima:
            return True
    return False


def _tensor_name(e: sp.Expr) -> str | None:
    """The tensor ``e`` reads whole: ``m[u]``'s m, a 0-d tensor's symbol."""
    if isinstance(e, sp.Indexed):
        return e.base.label.name
    if isinstance(e, sp.Symbol):
        return e.name
    return None


# RANGE: a / b**k is divided by b k times, b**k never formed: b**2 underflows (or overflows)
# where a / b / b does not (d(a / (S softplus(w))) / dw divides by softplus(w)**2, 0 in
# float64 at w = -400 where the gradient is 1e172). Each quotient is within range wherever the
# true one is and a / b is: |b| < 1 only grows a, |b| > 1 only shrinks it. As many passes as
# b * b then a division, and no pass at all where b is a python number (folded). A fractional
# k the same, its fraction last: an L2 norm written inline, x / sqrt(S), differentiates to
# g S**(-1/2) - x Sum(g x) S**(-3/2), and S**(3/2) overflowed at x = 1e103 (float64; 1e13 in
# float32), where the gradient is 1e-104: that term was 0, the gradient silently wrong (found
# by probing); its second order's S**(5/2) earlier still.
DIVIDE_TIMES = 3


def _divisors(cx: Context, base: sp.Expr, k: sp.Expr, order: list[sp.Symbol]) -> list[ir.Node]:
    """What ``/ base**k`` divides by: ``base`` k times for a small whole k on a tensor (and
    then ``base`` to k's fraction), else the power itself."""
    if k.is_Rational and 1 < k and int(k) <= DIVIDE_TIMES:
        b = cx.value(base, order)
        if not b.scalar:
            whole, fraction = int(k), k - int(k)
            return [b] * whole + ([cx.value(base**fraction, order)] if fraction else [])
    return [cx.value(base**k, order)]


def _gated(cx: Context, e: sp.Mul) -> sp.Expr | None:
    """``where(c, a, 0) x y`` -> ``where(c, a x, 0) y``; ``delta(i, X[j]) x`` -> ``where(i ==
    X[j], x, 0)``: a gate selects, it does not multiply.

    The adjoint of ``where(c, s, -inf)`` carries the gate ``where(c, 1, 0)``, and the rest of
    the product may be inf or NaN at the positions the gate drops (``sinh(-inf) / S**2`` with
    ``S = inf``); a one-hot beside ``0 * sinh(-inf)`` is the same. ``0 * nan`` is nan, so a
    0/1 mask multiplied in keeps it, where autograd's where backward and its scatters select.
    Equal as real numbers wherever the rest is finite.

    What goes inside: the factors on the gate's own axes, and every computed factor (a call,
    a power, a sum: ``0 * inf`` is made of two finite-looking factors). A plain read of a
    tensor over further axes (``probs[b, t, v]`` beside a gate over ``b, t``) stays outside,
    so the gate is taken on the small tensor and the full-size product is one pass, unless
    the tensor may hold an infinity (``w = where(d <= k, s, -inf)`` beside the gate of its
    own adjoint, ``d(w**2)/dw``: -inf times the gate's 0 was nan, fuzz --windows 16310). A
    gate on numbers alone stays the float mask, unless a param is among them: a caller may
    make it inf.
    """
    factors = tuple(as_gate(f) for f in sp.Mul.make_args(e))
    gate = next((f for f in factors if is_gate(f)), None)
    if gate is None:
        factors = _masked(cx, factors)
        gate = next((f for f in factors if is_gate(f)), None)
    if gate is None:
        return None
    axes = cx.scope([]).axes
    rest = without(factors, gate)
    selected = [not (_finite_read(cx, f) or is_gate(f)) or axes(f) <= axes(gate) for f in rest]
    inside = [f for f, s in zip(rest, selected, strict=True) if s]
    x = sp.Mul(*inside)
    if not any(f.atoms(sp.Indexed) for f in inside) and not _reads_param(cx, x):
        return None
    outside = sp.Mul(*[f for f, s in zip(rest, selected, strict=True) if not s])
    if isinstance(gate, sp.KroneckerDelta):
        return where(sp.Eq(*gate.args, evaluate=False), x, 0) * outside
    if isinstance(gate, sp.Heaviside):
        return _stepped(*gate.args, x) * outside
    c, a, b = gate.args
    return where(c, a * x, b * x) * outside


# RANGE: a gate hidden behind a name. A double backward is lowered statement by statement, and
# an adjoint defined gated, ``dout_exp0 = where(c, g, where(c2, 0, g / 2))`` (a minimum's
# step), is read by a later product beside the tensor that overflows exactly where the gate
# is 0: ``dx = dout_exp0 * out_exp0 / alpha`` with ``out_exp0 = exp(x / alpha)`` inf there
# (CELU at alpha = 1e-3, x = 800), 0 * inf = nan where the second derivative is 0. The read
# carries its definition's mask into the product, ``where(c2, 0, 1) * dout_exp0 * ..``, and
# _gated selects as it does for a gate written in the product itself.
def zero_mask(e: sp.Expr) -> sp.Expr:
    """A product of 0/1 gates that is 0 wherever ``e``'s where() and step structure makes it
    exactly 0, 1 where it may not be (1: no such structure). ``where(c, a, b)``'s is
    ``where(c, mask(a), mask(b))``, 0's is 0, a product's the product of its factors', a sum's
    the one mask all its terms share (1 where they differ),
    ``Heaviside(u, h)``'s ``where(u < 0, 0, 1)`` (``where(u > 0, 1, 0)`` for h = 0), a given
    term's its term's (:mod:`derive.symbolic.seeds`)."""
    if e == 0:
        return sp.S.Zero
    if isinstance(e, where):
        c, a, b = e.args
        return where(c, zero_mask(a), zero_mask(b))
    if isinstance(e, sp.Mul):
        return sp.Mul(*[zero_mask(f) for f in e.args])
    if isinstance(e, sp.Add):
        # a sum is 0 where every term is: the one mask the terms share, or the gates common
        # to all of them (a second order's adjoint of a masked exp, ``g (where(c, a, 0) +
        # where(c, b where(d, 1, 0), 0))`` is 0 wherever c is false)
        masks = {zero_mask(t) for t in e.args} - {sp.S.Zero}
        if len(masks) <= 1:
            return masks.pop() if masks else sp.S.Zero
        common = set.intersection(*[_outer_gates(m) for m in masks])
        return sp.Mul(*[where(c, 1, 0) for c in sorted(common, key=sp.default_sort_key)])
    if isinstance(e, sp.Pow) and e.exp.is_Integer and e.exp > 0:
        return zero_mask(e.base)
    if isinstance(e, given):  # its term, or zeros where its cotangents were not given
        return zero_mask(e.args[0])
    if isinstance(e, sp.Heaviside) and e.atoms(sp.Indexed):
        arg = e.args[0]
        at_zero = e.args[1] if len(e.args) > 1 else sp.Rational(1, 2)
        if at_zero == 0:
            return where(arg > 0, 1, 0)
        return where(arg < 0, 0, 1) if at_zero.is_nonzero else sp.S.One
    return sp.S.One


def _outer_gates(mask: sp.Expr) -> set:
    """The conditions c of a :func:`zero_mask` that make it 0 wherever c is false:
    ``where(c, m, 0)``'s c and m's, a product's of every factor."""
    if isinstance(mask, where) and mask.args[2] == 0:
        return {mask.args[0]} | _outer_gates(mask.args[1])
    if isinstance(mask, sp.Mul):
        return set().union(*[_outer_gates(f) for f in mask.args])
    return set()


def note_zeros(cx: Context, name: str, e: sp.Expr, axes: tuple) -> None:
    """Remember ``name[axes] = e``'s :func:`zero_mask` when it has one that a read of the name
    can state alone: over the name's own axes, no sum or Max in it."""
    mask = zero_mask(e)
    if mask.is_number or mask.has(sp.Sum, ReduceMax):
        return
    if free_indices(mask) <= set(axes):
        cx.zeros[name] = (tuple(axes), mask)


def overflowing(steps: list) -> set[str]:
    """The tensors among the forward's ``steps`` defined as a function that grows fast (exp,
    cosh, sinh, expm1): inf as a float where the real value is merely large."""
    return {
        step.name
        for step in steps
        if isinstance(step, Definition)
        and type(step.body) in BY_NODE
        and BY_NODE[type(step.body)].grows_fast
    }


def may_overflow(cx: Context, f: sp.Expr) -> bool:
    """A factor that may be inf where its real value is finite: a read of a tensor the forward
    defines as a function that grows fast, such a call itself, a power of one, a division by
    a tensor."""
    if isinstance(f, sp.Pow):
        if f.exp.is_negative:
            return not cx.scope([]).scalar(f.base)
        return may_overflow(cx, f.base)
    if type(f) in BY_NODE:
        return BY_NODE[type(f)].grows_fast
    return _tensor_name(f) in cx.overflowing


def _masked(cx: Context, factors: tuple) -> tuple:
    """``factors`` with each plain read of a name :func:`note_zeros` remembered (its indices
    symbols) multiplied by its mask, the mask's axes those of the read, where another factor
    may overflow; ``factors``
    where none does. Not inside a where() that selects on the mask's own condition: there
    the mask is decided (and selecting again would not end)."""
    if not any(may_overflow(cx, f) or _off_domain(cx, f) for f in factors):
        return factors
    return _with_masks(cx, factors)


def _off_domain(cx: Context, f: sp.Expr) -> bool:
    """A factor that is NaN where its argument leaves its function's domain: a fractional
    power or a log of a tensor. ``x**0.5`` beside the adjoint ``where(x > 0, g v, 0)`` in the
    second order of ``w where(x > 0, x**1.5, 0)`` was 0 * nan at x < 0, where the where()
    never read it (found by probing)."""
    if isinstance(f, sp.Pow):
        return f.exp.is_integer is not True and not cx.scope([]).scalar(f.base)
    if type(f) in BY_NODE:
        return BY_NODE[type(f)].domain != "real" and bool(f.atoms(sp.Indexed))
    return False


def _with_masks(cx: Context, factors: tuple) -> tuple:
    """``factors`` with each plain read of a name :func:`note_zeros` remembered multiplied by
    its mask (see :func:`_masked`), and each sum by the gates every one of its terms carries
    that way: a second order's ``(dout_log0 - b_dx db_dx) / x`` is 0 where x <= 0 in both
    terms (``w where(x > 0, log(x), 0)``'s Hessian at x = 0 was 0 / 0 = nan; found by
    probing)."""
    decided = {w.args[0] for w in cx.within if isinstance(w, where)}
    out: list[sp.Expr] = []
    for f in factors:
        if isinstance(f, sp.Add):
            mask = zero_mask(_known_zeros(cx, f))
            gates = [g for g in sp.Mul.make_args(mask) if is_gate(g)]
            if any(g.args[0] in decided for g in gates):
                gates = []
            out.extend([*gates, f])
            continue
        mask = _read_mask(cx, f)
        if mask is None or {w.args[0] for w in mask.atoms(where)} & decided:
            out.append(f)
            continue
        out.extend([*sp.Mul.make_args(mask), f])
    return tuple(out)


def _read_mask(cx: Context, f: sp.Expr) -> sp.Expr | None:
    """The mask :func:`note_zeros` remembered for the name ``f`` reads plainly, at the
    indices read; None where there is none."""
    entry = cx.zeros.get(_tensor_name(f) or "")
    indices = f.indices if isinstance(f, sp.Indexed) else ()
    if entry is None or len(entry[0]) != len(indices) or indices and not plain(f):
        return None
    axes, mask = entry
    return mask.xreplace(dict(zip(axes, indices, strict=True)))


def _known_zeros(cx: Context, e: sp.Expr) -> sp.Expr:
    """``e`` with each plain read of a name :func:`note_zeros` remembered multiplied by its
    mask, through sums, products and a double backward's given terms: what
    :func:`zero_mask` of it finds is where ``e`` is 0."""
    if isinstance(e, (sp.Add, sp.Mul)):
        return e.func(*[_known_zeros(cx, a) for a in e.args])
    if isinstance(e, given):
        return e.func(_known_zeros(cx, e.args[0]), *e.args[1:])
    mask = _read_mask(cx, e)
    return e if mask is None else mask * e


def _reads_param(cx: Context, e: sp.Expr) -> bool:
    """``e`` reads a param: a caller's number, inf or -inf as it may be (``minimum(x, c) *
    log(alpha)`` at alpha = 0: minimum's step times -inf was nan where torch selects)."""
    return any(s.name in cx.params for s in e.free_symbols if isinstance(s, sp.Symbol))


def _finite_read(cx: Context, f: sp.Expr) -> bool:
    """A plain read of a tensor a caller passed (an input, grad_out): finite. A tensor the
    function computes is finite as a real number but may overflow as a float where the gate
    drops it: ``e[t, s] = exp(x[s] - m[t])`` is inf at s > t, where a causal where() never
    reads it (a logcumsumexp's Max adjoint, ``where(s <= t, 1, 0) * e``, was nan times 0 at
    x = [0, 800]: found by probing; tests/cases/masked_exp_beside_its_gate.py)."""
    if not plain(f) or not (f.is_extended_real is True and f.is_real is True):
        return False
    return f.base.label.name in cx.finite


def _stepped(arg: sp.Expr, at_zero: sp.Expr, x: sp.Expr) -> sp.Expr:
    """Heaviside(arg, h) x as a selection: x where arg > 0, h x where arg = 0, else 0 (relu's
    h = 0 is torch's threshold backward; maximum's h = 1/2 splits a tie as torch.maximum's)."""
    if at_zero == 0:
        return where(arg > 0, x, 0)
    if at_zero == 1:
        return where(arg >= 0, x, 0)
    return where(arg > 0, x, where(arg < 0, 0, at_zero * x))


# x**(1/2), x**(-1/2), 1/x, x**2 on tensors: torch.reciprocal and torch.square skip the
# python-level operator wrappers of Tensor.__rtruediv__ / __pow__ (microseconds a call)
POWERS = {
    sp.Rational(1, 2): "torch.sqrt({0})",
    sp.Rational(-1, 2): "torch.rsqrt({0})",
    sp.Integer(-1): "torch.reciprocal({0})",
    sp.Integer(2): "torch.square({0})",
}


# SQUARE: a named tensor squared is ``x * x``, one mul: torch.square is pow(x, 2) (profiled:
# square, pow, result_type, to), the same kernel (x * x, the same bits) behind four calls. A
# computed base keeps torch.square (x * x would compute it twice); x**3 keeps pow: one kernel,
# where x * x * x is two passes over the tensor.


def power(cx: Context, e: sp.Pow, order: list[sp.Symbol]) -> ir.Node:
    base, exp = cx.value(e.base, order), e.exp
    if not cx.scope(order).scalar(exp):  # an index or a tensor in the exponent: gamma**(s - t)
        power = cx.value(exp, order)
        axes = union([base.axes, power.axes], order)
        args = (base if base.scalar else align(base, axes), align(power, axes))
        return ir.Apply("torch.pow({0}, {1})", args, axes=axes)
    if base.scalar and abs(exp) == sp.Rational(1, 2):  # sqrt(D): one python float
        root = ir.Apply("math.sqrt({0})", (base,))
        return root if exp > 0 else ir.Binary("/", ir.Number(1), root)
    if isinstance(base, ir.Ref) and not base.scalar and exp == 2:
        return ir.Binary("*", base, base, axes=base.axes)  # x**2 -> x * x (see SQUARE)
    if not base.scalar and exp in POWERS:
        return ir.Apply(POWERS[exp], (base,), axes=base.axes)
    if base.scalar:
        return ir.Binary("**", base, cx.value(exp, []), axes=base.axes)
    # torch.pow, not ``x**3``: Tensor.__pow__ asks result_type and converts the number to a
    # tensor first (three calls more); pow(Tensor, Scalar) is one
    return ir.Apply("torch.pow({0}, {1})", (base, cx.value(exp, [])), axes=base.axes)


def product(
    num: list[ir.Node], den: list[ir.Node], order: list[sp.Symbol], scale: tuple | None
) -> ir.Node:
    """Multiply the small factors first: each full-size product is a pass over the tensor.

    ``g * probs / N`` becomes ``g / N * probs``, ``bnraw * s / (N - 1)`` becomes
    ``s / (N - 1) * bnraw``; python numbers (``scale``, sign included) are folded into one
    and applied to the smallest tensor factor.
    """
    rank = lambda v: len(v.axes)  # noqa: E731
    acc: ir.Node | None = None
    for level in sorted({rank(v) for v in num + den}):
        parts = ([acc] if acc else []) + [v for v in num if rank(v) == level]
        below = [v for v in den if rank(v) == level]
        if len(parts) == 1 and not below and (scale is None or acc is not None):
            acc = parts[0]
            continue
        axes = union([v.axes for v in parts + below], order)
        if not parts and len(below) == 1 and scale is None and not below[0].scalar:
            acc = ir.Apply("torch.reciprocal({0})", (below[0],), axes=below[0].axes)
            continue
        factors = [align(v, axes) for v in parts] or [ir.Number(1)]
        node = _interleaved(factors, [align(d, axes) for d in below], axes)
        if scale is not None and acc is None:
            node = ir.Binary(scale[0], node, scale[1], axes=axes)
        acc = node
    return acc if acc else ir.Number(1)


def _interleaved(num: list[ir.Node], den: list[ir.Node], axes: tuple) -> ir.Node:
    """``a / c * b / d``, not ``a * b / c / d``: the same passes, in an order that keeps the
    running product near the result's magnitude where numerator and denominator factors come
    in pairs of like size, as the quotient rule makes them: ``S1 T / S2**2`` (S1, S2 and T near
    1e306, fuzz --range 930115) is ``S1 / S2 * T / S2`` and never forms ``S1 T`` (inf). A
    heuristic, not a guarantee: no fixed order is safe for every magnitude."""
    node = num[0]
    rest_num, rest_den = list(num[1:]), list(den)
    while rest_num or rest_den:
        if rest_den:
            node = ir.Binary("/", node, rest_den.pop(0), axes=axes)
        if rest_num:
            node = ir.Binary("*", node, rest_num.pop(0), axes=axes)
    return node


def call(cx: Context, f: Function, args: tuple, order: list[sp.Symbol]) -> ir.Node:
    """A row of the function registry; Max/Min of many arguments nest pairwise."""
    if f.arity == 2 and len(args) > 2:
        return call(cx, f, (args[0], f.make(*args[1:])), order)
    values = [cx.value(a, order) for a in args]  # an int argument is cast (Context.value)
    if all(v.scalar for v in values):
        if f.python is None:
            raise DerivationError(cx.op, f"{f.name}() of a number is not supported")
        return ir.Apply(f.python, tuple(values))
    if f.arity == 2 and any(v.scalar for v in values):  # maximum(x, 0): a clamp
        t, c = (values[0], values[1]) if values[1].scalar else (values[1], values[0])
        bound = "min" if f.name == "maximum" else "max"
        return ir.Apply(f"torch.clamp({{0}}, {bound}={{1}})", (t, c), axes=t.axes)
    form = f.torch
    if "-{0}" in form:
        # a form that negates its argument gets the argument negated, one kernel fewer where
        # it is a negation or a sum: softplus(-x) is -logsigmoid(x), not -logsigmoid(-(-x)),
        # and softplus(x - y) -logsigmoid(y - x)
        form, values = form.replace("-{0}", "{0}"), [cx.value(-args[0], order), *values[1:]]
    axes = union([v.axes for v in values], order)
    return ir.Apply(form, tuple(align(v, axes) for v in values), axes=axes)


def heaviside(cx: Context, e: sp.Heaviside, order: list[sp.Symbol]) -> ir.Node:
    """Heaviside(x, h): a kink's derivative, torch on a tensor, python on a number (a param)."""
    arg = cx.value(e.args[0], order)
    at_zero = e.args[1] if len(e.args) > 1 else sp.Rational(1, 2)
    heaviside_code("x", at_zero, None)  # refuses a value at zero it has no code for, here
    return ir.Heaviside(arg, at_zero, None if arg.scalar else cx.like, axes=arg.axes)
