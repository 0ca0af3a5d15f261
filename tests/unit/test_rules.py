"""One input, one expected output, per rule: the Sum rules, the identities for range, the
simplifier's product tidying, and the function registry (as tinygrad and SymPy test theirs)."""

from __future__ import annotations

import pytest
import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from derive.functions import FUNCTIONS, clamp, relu, sigmoid, softplus, where
from derive.identities import (
    ACCURACY_RULES,
    DEFINITION_RULES,
    FORWARD_RULES,
    rewrite,
    split_logs,
)
from derive.symbolic.canon import Pattern, fold, ruled_patterns
from derive.symbolic.collapse import ruled
from derive.symbolic.simplify import (
    LAST_RULES,
    SUM_RULES,
    Reduction,
    Simplifier,
    expand_product,
    powsimp_exp,
    unclamped_deltas,
)

n, m, k, c = sp.symbols("n m k c", integer=True)
N, M, K = sp.symbols("N M K", integer=True, positive=True)
x = sp.IndexedBase("x", real=True)
y = sp.IndexedBase("y", real=True)
t = sp.IndexedBase("t", integer=True)
mu = sp.IndexedBase("mu", real=True)
XK = sp.IndexedBase("x", shape=(K,), real=True)  # x with its axis' size: reads past it are 0
LIM = (k, 0, K - 1)
LIM_M = (k, 0, M - 1)
# a segment softmax's backward: seg[k] the segment of entry k, a sum over all of seg's axis
SEG = sp.IndexedBase("seg", shape=(K,), integer=True)
DEN = sp.IndexedBase("den", real=True)
RULES = {rule.__name__: rule for rule in SUM_RULES}


def _apply(rule: str, body: sp.Expr, simplifier: Simplifier | None = None) -> sp.Expr | None:
    return RULES[rule](body, LIM, simplifier or Simplifier())


SUM_RULE_CASES = [
    ("_sum_zero", sp.S.Zero, sp.S.Zero),
    ("_sum_of_add", x[k] + y[k], sp.Sum(x[k], LIM) + sp.Sum(y[k], LIM)),
    ("_delta_eliminate", x[k] * sp.KroneckerDelta(k, t[n]), x[t[n]]),
    # sum_k exp(x[k]) delta(k, 2 n + c) -> exp(x[e']) 1[0 <= 2 n + c <= K - 1]: an affine
    # e may lie past k's range, where no k picks it (fuzz 9008: exp(0) = 1 there, not 0); the
    # body, not finite everywhere, is read at e' = clamp(2 n + c, 0, K - 1), inside k's range
    # (fuzz --affine 1147: a body NaN outside it is NaN to the second order)
    (
        "_delta_eliminate",
        sp.exp(x[k]) * sp.KroneckerDelta(k, 2 * n + c),
        where(
            2 * n + c >= 0,
            where(2 * n + c <= K - 1, sp.exp(x[clamp(2 * n + c, 0, K - 1)]), 0),
            0,
        ),
    ),
    # ... and no indicator where a factor reads K's axis at e, zero-padded there already
    ("_delta_eliminate", y[k] * XK[k] * sp.KroneckerDelta(k, n + c), y[n + c] * XK[n + c]),
    ("_constant", y[n], K * y[n]),
    # sum_k [seg[n] == seg[k]] x[k] / den[seg[k]] -> sum_k [..] x[k] / den[seg[n]]
    (
        "_equal_reads",
        where(sp.Eq(SEG[n], SEG[k]), 1, 0) * x[k] / DEN[SEG[k]],
        sp.Sum(where(sp.Eq(SEG[n], SEG[k]), 1, 0) * x[k], LIM) / DEN[SEG[n]],
    ),
    ("_factor_out", y[n] * x[k], y[n] * sp.Sum(x[k], LIM)),
    ("_expand_if_cheaper", sp.KroneckerDelta(k, c) * (x[k] + 1), x[c] + 1),
    # sum_k where(0 <= k + 1 <= K - 1, x[k], 0) d(n, clamp(k + 1, 0, K - 1)): under the guard
    # the clamp is k + 1, and the delta is solved as d(n, k + 1) is (a shift's second order)
    (
        "_unclamped_under_guard",
        where(k + 1 >= 0, where(k + 1 <= K - 1, x[k], 0), 0)
        * sp.KroneckerDelta(n, clamp(k + 1, 0, K - 1)),
        Simplifier().sum(
            where(k + 1 >= 0, where(k + 1 <= K - 1, x[k], 0), 0) * sp.KroneckerDelta(n, k + 1),
            (LIM,),
        ),
    ),
    # sum_k y[k] (d(k, c) x[n] + x[k]) -> y[c] x[n] + sum_k y[k] x[k]: the delta's term apart,
    # solved; kept whole it is lowered as a K x C identity matrix (layernorm's second order)
    (
        "_delta_terms_apart",
        y[k] * (sp.KroneckerDelta(k, c) * x[n] + x[k]),
        x[n] * y[c] + sp.Sum(x[k] * y[k], LIM),
    ),
    # ... and every term apart where each holds one (a focal loss's second order)
    (
        "_delta_terms_apart",
        y[k] * (sp.KroneckerDelta(k, c) * x[n] + sp.KroneckerDelta(k, m) * x[m]),
        x[n] * y[c] + x[m] * y[m],
    ),
    # ... and through a sum over another index, a product and an Add inside it:
    # sum_k y[k] sum_m (d(k, c) x[m] + x[k]) x[m] -> y[c] sum_m x[m]^2 + sum_k y[k] sum_m ..:
    # summed whole, the delta was a mask over (k, m, c) (fuzz --affine 5041's second order)
    (
        "_delta_terms_apart",
        y[k] * sp.Sum((sp.KroneckerDelta(k, c) * x[m] + x[k]) * x[m], (m, 0, M - 1)),
        y[c] * sp.Sum(x[m] ** 2, (m, 0, M - 1))
        + sp.Sum(y[k] * sp.Sum(x[k] * x[m], (m, 0, M - 1)), LIM),
    ),
    # sum_k y[k] where(n >= 1, sum_m x[m] d(k, 2 m), 0) -> where(n >= 1, sum_k y[k] .., 0):
    # the guard free of k stands outside, and the sum meets the delta under the sum over m
    (
        "_guard_out",
        y[k] * where(n >= 1, sp.Sum(x[m] * sp.KroneckerDelta(k, 2 * m), (m, 0, M - 1)), 0),
        where(
            n >= 1,
            Simplifier().sum(
                y[k] * sp.Sum(x[m] * sp.KroneckerDelta(k, 2 * m), (m, 0, M - 1)), (LIM,)
            ),
            0,
        ),
    ),
    # ... and factors free of k then stand outside the sum: a window's indicator summed with
    # one read, not a product over every axis (fuzz --windows 16528's second order)
    (
        "_guard_out",
        y[k] * where(n >= 1, x[n] * where(k - n >= 0, 1, 0), 0),
        where(n >= 1, x[n] * sp.Sum(where(k - n >= 0, 1, 0) * y[k], LIM), 0),
    ),
    # sum_k x[k] delta(n, k + c) -> x[n - c] 1[0 <= n - c <= K - 1]
    (
        "delta_invert",
        x[k] * sp.KroneckerDelta(n, k + c),
        where(n - c >= 0, 1, 0) * where(n - c <= K - 1, 1, 0) * x[n - c],
    ),
    # sum_k y[k] sum_c x[c] delta(n, k + 2 c) -> sum_c y[n - 2 c] x[c] 1[0 <= n - 2 c <= K - 1]
    (
        "_delta_through_sum",
        y[k] * sp.Sum(x[c] * sp.KroneckerDelta(n, k + 2 * c), (c, 0, M - 1)),
        sp.Sum(
            where(n - 2 * c >= 0, 1, 0) * where(n - 2 * c <= K - 1, 1, 0) * x[c] * y[n - 2 * c],
            (c, 0, M - 1),
        ),
    ),
    # sum_k y[k] sum_c x[c] delta(k, t[c]) -> sum_c x[c] y[t[c]]: a data index, solved where
    # it stands (fuzz --windows 15002's second order: a (B, B, B, B) mask)
    (
        "_delta_through_sum",
        y[k] * sp.Sum(x[c] * sp.KroneckerDelta(k, t[c]), (c, 0, M - 1)),
        sp.Sum(x[c] * y[t[c]], (c, 0, M - 1)),
    ),
]


@pytest.mark.parametrize(("rule", "body", "expected"), SUM_RULE_CASES)
def test_sum_rule(rule: str, body: sp.Expr, expected: sp.Expr) -> None:
    assert _apply(rule, body) == expected


def test_a_deltas_clamp_is_read_unclamped_beside_its_guard() -> None:
    # where(0 <= k + 1 <= K - 1, f, 0) (d(n, clamp(k + 1, 0, K - 1)) a + b): where the guard
    # holds the clamp is k + 1, where it fails the product is 0 whatever the delta reads;
    # reads keep their clamps (x read past its end is no number)
    guard = where(k + 1 >= 0, where(k + 1 <= K - 1, 1, 0), 0)
    at = clamp(k + 1, 0, K - 1)
    product = guard * (sp.KroneckerDelta(n, at) * x[at] + y[k])
    assert unclamped_deltas(product) == guard * (sp.KroneckerDelta(n, k + 1) * x[at] + y[k])
    assert unclamped_deltas(sp.KroneckerDelta(n, at) * x[k]) == sp.KroneckerDelta(n, at) * x[k]
    # nested clamps, as the guards name them, outermost first
    inner = clamp(K - k - 1, 0, K - 1)
    guards = where(
        K - k - 1 >= 0,
        where(K - k - 1 <= K - 1, where(c + inner >= 0, where(c + inner <= M - 1, 1, 0), 0), 0),
        0,
    )
    nested = guards * sp.KroneckerDelta(n, clamp(c + inner, 0, M - 1)) * x[k]
    assert unclamped_deltas(nested) == guards * sp.KroneckerDelta(n, c + K - k - 1) * x[k]


def test_a_clamped_delta_in_one_term_beside_its_guard_is_solved() -> None:
    # sum_k y[k] (guard d(n, clamp(k + 1, 0, K - 1)) x[n] + x[k]): unclamped in the product,
    # then apart and solved (fuzz --windows 16500: a six-axis scatter kept whole)
    guard = where(k + 1 >= 0, where(k + 1 <= K - 1, 1, 0), 0)
    body = y[k] * (guard * sp.KroneckerDelta(n, clamp(k + 1, 0, K - 1)) * x[n] + x[k])
    got = Simplifier().simplify(sp.Sum(body, LIM))
    assert not got.has(sp.KroneckerDelta)
    solved = where(n - 1 >= 0, 1, 0) * where(n - 1 <= K - 1, 1, 0) * x[n] * y[n - 1]
    assert got == guard.xreplace({k: n - 1}) * solved + sp.Sum(x[k] * y[k], LIM)


def test_a_guard_beside_a_delta_stays_where_the_delta_is_solved() -> None:
    # no sum holding a delta under it: the guard stays (a delta beside it is solved as it
    # stands, by a scatter the guard outside would hide: fuzz --affine 4022)
    body = y[k] * where(n >= 1, sp.KroneckerDelta(k, t[n]) * x[n], 0)
    assert _apply("_guard_out", body) is None
    assert _apply("_guard_out", y[k] * where(k >= 1, x[k], 0)) is None  # reads k


def test_a_strided_delta_under_a_sum_goes_outermost() -> None:
    # sum_j y[j] sum_m x[m, j] d(n, 2 m): no rule solves the strided delta; the sums are
    # interchanged so that it stands outermost, a scatter of sum_j y x along n (fuzz --affine
    # 4142: kept inside, the sum over m was computed for every n and j)
    j = sp.Symbol("j", integer=True)
    inner = sp.Sum(x[m, j] * sp.KroneckerDelta(n, 2 * m), (m, 0, M - 1))
    got = Simplifier().sum(y[j] * inner, ((j, 0, K - 1),))
    assert got == sp.Sum(
        sp.KroneckerDelta(n, 2 * m) * sp.Sum(x[m, j] * y[j], (j, 0, K - 1)), (m, 0, M - 1)
    )
    # a delta that reads j stays where it is
    reads_j = sp.Sum(x[m, j] * sp.KroneckerDelta(n, 2 * m + 2 * j), (m, 0, M - 1))
    assert Simplifier().sum(y[j] * reads_j, ((j, 0, K - 1),)) == sp.Sum(
        y[j] * reads_j, (j, 0, K - 1)
    )


def test_sum_rules_decline_what_they_do_not_match() -> None:
    assert _apply("_sum_zero", x[k]) is None
    assert _apply("_constant", x[k]) is None
    assert _apply("_delta_eliminate", x[k] * sp.KroneckerDelta(k, x[k])) is None


def test_fold_reduction_reads_the_definition_back() -> None:
    # mu[m] = 1/K sum_k x[k, m]  =>  sum_k x[k, m] -> K mu[m]
    x2 = sp.IndexedBase("x", real=True)
    red = Reduction(mu, (m,), 1 / K, x2[k, m], LIM)
    assert _apply("_fold_reduction", x2[k, m], Simplifier([red])) == K * mu[m]


def test_fold_through_sum_interchanges_where_the_inner_sum_folds() -> None:
    # out[n, m] = 1/S[n] sum_k x[n, k] y[k, m]  =>  sum_k x[n, k] sum_m g[m] y[k, m]
    #   = sum_m g[m] sum_k x[n, k] y[k, m] = sum_m g[m] S[n] out[n, m]
    out, S, g = (sp.IndexedBase(s, real=True) for s in ("out", "S", "g"))
    red = Reduction(out, (n, m), 1 / S[n], x[n, k] * y[k, m], LIM)
    inner = sp.Sum(g[m] * y[k, m], (m, 0, M - 1))
    got = _apply("_fold_through_sum", x[n, k] * inner, Simplifier([red]))
    assert got == S[n] * sp.Sum(g[m] * out[n, m], (m, 0, M - 1))
    # no definition reads it back: the sums stay in their order
    assert _apply("_fold_through_sum", x[n, k] * inner, Simplifier()) is None


def test_a_delta_in_every_term_is_pulled_out_last() -> None:
    # sum_k (d(n, c) x[k] - d(n, c) y[k]) -> d(n, c) (sum_k x[k] - sum_k y[k]): the sum over n
    # around it then solves the delta (attention's second order: a B x B mask it summed over)
    (rule,) = LAST_RULES
    d = sp.KroneckerDelta(n, c)
    got = rule(d * x[k] - d * y[k], LIM, Simplifier())
    assert got == d * (sp.Sum(x[k], LIM) - sp.Sum(y[k], LIM))
    assert rule(d * x[k] - y[k], LIM, Simplifier()) is None  # not in every term


def test_a_delta_the_sum_solves_is_not_pulled_out_first() -> None:
    # batchnorm's second order: sum_{k, j} (d(k, n) d(j, m) c[j] - d(j, m) c[j] x[k, j] y[n, j]
    # / (N - 1) - d(j, m) c[j] / N) g[k, j]. Pulling d(j, m) out for k first leaves
    # (d(k, n) c - c x y / (N - 1) - c / N) g whole, its delta an N x N mask; expanded for j
    # first, every delta is solved
    j = sp.Symbol("j", integer=True)
    g2, x2, cj = (sp.IndexedBase(s, real=True) for s in ("g", "x", "c"))
    dk, dj = sp.KroneckerDelta(k, n), sp.KroneckerDelta(j, m)
    body = dk * dj * cj[j] - x2[k, j] * cj[j] * dj * y[j] / (K - 1) - cj[j] * dj / K
    got = Simplifier().simplify(sp.Sum(body * g2[k, j], LIM, (j, 0, M - 1)))
    assert not got.has(sp.KroneckerDelta)


def test_alpha_equal_sums_cancel() -> None:
    j = sp.Symbol("j", integer=True)
    expr = sp.Sum(x[k], LIM) - sp.Sum(x[j], (j, 0, K - 1))
    assert Simplifier().simplify(expr) == 0
    # as factors too: sum_k x[k] / sum_j x[j] = 1
    assert Simplifier().simplify(sp.Sum(x[k], LIM) / sp.Sum(x[j], (j, 0, K - 1))) == 1


def test_expanding_keeps_a_denominator_whole() -> None:
    # sum_k x[k] (y[k] / ((y[k] + 1) s) - z / s**2), s = sum_j x[j],
    # z = sum_j x[j] y[j] / (y[j] + 1):
    # z / s - z s / s**2 = 0 once each term keeps s a factor (expand_mul wrote the first
    # denominator y[k] s + s, and s no longer cancelled)
    j = sp.Symbol("j", integer=True)
    s = sp.Sum(x[j], (j, 0, K - 1))
    z = sp.Sum(x[j] * y[j] / (y[j] + 1), (j, 0, K - 1))
    body = x[k] * (y[k] / ((y[k] + 1) * s) - z / s**2)
    assert Simplifier().simplify(sp.Sum(body, LIM)) == 0


def test_a_product_is_multiplied_out_outside_its_nests_of_sums() -> None:
    # (1 - a**2) sum_k (1 - y[k]**2) sum_j (1 - x[j]**2) y[j] -> nest - a**2 nest: the nest's
    # levels were simplified on their own; expand_mul's deep expansion multiplied out every
    # body in it, a new nest every product above it walked again (a tanh MLP as one op: twice
    # the work a layer). An innermost sum's body is multiplied out as expand_mul does.
    a, b, cc, d = sp.symbols("a b cc d", real=True)
    j = sp.Symbol("j", integer=True)
    nest = sp.Sum((1 - y[k] ** 2) * sp.Sum((1 - x[j] ** 2) * y[j], (j, 0, K - 1)), LIM)
    assert expand_product((1 - a**2) * nest) == nest - a**2 * nest
    assert expand_product((a + b) * (cc + d) * nest) == sp.Add(
        *[t * nest for t in sp.expand_mul((a + b) * (cc + d)).args]
    )
    inner = (a + b) * sp.Sum((cc + d) * x[k], LIM)
    assert expand_product(inner) == sp.expand_mul(inner)


def test_exponentials_combine_only_where_something_cancels() -> None:
    kept = sp.exp(x[k]) * sp.exp(y[n])
    assert Simplifier().simplify(kept) == kept
    assert Simplifier().simplify(sp.exp(x[n]) * sp.exp(-x[n])) == 1


s_k = sp.Sum(x[k], LIM)
POWSIMP_CASES = [
    # powsimp changes these: the guard must hand each one to it
    sp.exp(x[k]) * sp.exp(y[n]),  # one base E twice
    sp.exp(x[n]) * sp.exp(2 * y[n]) * y[n],
    (x[n] - y[n]) * (y[n] - x[n]),  # negated bases (Mul keeps both)
    2**k / 4,  # a number base beside the coefficient
    sp.sqrt(x[n] * y[n]) * x[n],  # a product as a base
    sp.Pow(sp.Pow(x[n], k, evaluate=False), c, evaluate=False),  # a power of a power
    s_k ** (c + 1) * (1 / s_k) ** c,  # one base twice (Mul keeps symbolic exponents apart)
    sp.exp(x[n]) * sp.E,
    sp.Float(2.0) * sp.exp(x[n]) * sp.exp(y[n]),
    # and leaves these: the guard may skip them
    x[n] * sp.exp(y[k]) / s_k,
    sp.exp(-x[n] / 2) * y[n] ** sp.Rational(3, 2) * (x[n] + 1),
    (x[n] + y[n]) * sp.exp(x[n]) / (s_k * N) + sp.tanh(x[n]) * y[n],
    where(k <= n, 1 / sp.sqrt(K), 0) * x[k] * sp.exp(x[n] - mu[n]),
]


@pytest.mark.parametrize("expr", POWSIMP_CASES)
def test_powsimp_is_skipped_only_where_it_changes_nothing(expr: sp.Expr) -> None:
    assert powsimp_exp(expr) == sp.powsimp(expr, combine="exp")


def test_rational_cancellation() -> None:
    s, lab = sp.symbols("s y", real=True)
    expr = (1 - s) * (lab / s - (1 - lab) / (1 - s)) * s
    assert sp.expand(Simplifier().simplify(expr)) == lab - s


z = x[n]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (1 / (1 + sp.exp(-z)), sigmoid(z)),  # 1/(1 + e^-z) -> sigma(z)
        (1 / (1 + sp.exp(z)), sigmoid(-z)),  # 1/(1 + e^z) -> sigma(-z)
        (2 * sp.exp(z) / (1 + sp.exp(z)), 2 * sigmoid(z)),  # r e^z/(1 + e^z) -> r sigma(z)
        (sp.exp(z) / (1 + sp.exp(z)), sigmoid(z)),
        (sp.log(1 + sp.exp(z)), softplus(z)),  # log(1 + e^z) -> softplus(z)
        (z * sp.tanh(sp.log(1 + sp.exp(z))), z * sp.tanh(softplus(z))),  # Mish, inside
        (sp.log(2 + sp.exp(z)), sp.log(2) + softplus(z - sp.log(2))),  # a shifted softplus
    ],
)
def test_definition_rule(before: sp.Expr, after: sp.Expr) -> None:
    assert rewrite(before, DEFINITION_RULES) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (sp.log(sigmoid(z)), -softplus(-z)),  # log sigma(z) -> -softplus(-z)
        (sp.log(1 - sigmoid(z)), -softplus(z)),  # log(1 - sigma(z)) -> -softplus(z)
        (softplus(z) - softplus(-z), z),  # softplus(z) - softplus(-z) -> z
        (x[m] + softplus(z) - softplus(-z), x[m] + z),  # ... beside other terms
        # sinh/cosh pairs are tanh: 1/cosh's derivative keeps range (fuzz --range 180141)
        (sp.sinh(z) / sp.cosh(z) ** 2, sp.tanh(z) / sp.cosh(z)),
        (sp.sinh(z) / sp.cosh(z), sp.tanh(z)),
        (3 * sp.sinh(z) ** 2 / sp.cosh(z) ** 3, 3 * sp.tanh(z) ** 2 / sp.cosh(z)),
        (sp.sinh(z) ** 3 / sp.cosh(z), sp.tanh(z) * sp.sinh(z) ** 2),
        # ... beside a Sum too, which SymPy's matcher cannot see past (hidden while matching)
        (
            -sp.Sum(x[n, c], (n, 0, 2)) * sp.sinh(z) / sp.cosh(z) ** 2,
            -sp.Sum(x[n, c], (n, 0, 2)) * sp.tanh(z) / sp.cosh(z),
        ),
        (sp.sinh(z) * sp.cosh(z), sp.sinh(z) * sp.cosh(z)),  # no quotient: nothing overflows less
    ],
)
def test_forward_rule(before: sp.Expr, after: sp.Expr) -> None:
    assert rewrite(before, FORWARD_RULES) == after


def test_rules_leave_other_expressions_alone() -> None:
    # log(2 - e^z) has no softplus form (c = -1); log(2 + e^z) now has one (above)
    e = sp.log(2 - sp.exp(z)) + 1 / (2 + sp.exp(-z))
    assert rewrite(e, DEFINITION_RULES + FORWARD_RULES) == e


def test_registry_derivatives() -> None:
    v = sp.Symbol("v", real=True)
    assert sp.diff(sigmoid(v), v) == sigmoid(v) * (1 - sigmoid(v))
    assert sp.diff(softplus(v), v) == sigmoid(v)
    assert sp.diff(relu(v), v) == sp.Heaviside(v, 0)
    assert sigmoid(v).is_real and softplus(v).is_real and relu(v).is_real


def test_every_registry_row_lowers_with_its_arguments() -> None:
    for f in FUNCTIONS.values():
        code = f.torch.format(*["a", "b", "c"][: f.arity])
        assert code.count("a") >= 1 and "{" not in code, f.name


def test_sums_equal_only_up_to_a_captured_name_stay_apart() -> None:
    # sum_k g[k, y] + sum_k g[y, k]: renaming k to y in both would make them one (fuzz seed 1185)
    g, yy = sp.IndexedBase("g", real=True), sp.Symbol("y", integer=True)
    expr = sp.Sum(g[k, yy], LIM) + sp.Sum(g[yy, k], LIM)
    assert Simplifier().simplify(expr) == expr


def test_fold_reduction_reads_an_index_dependent_coefficient_at_the_match() -> None:
    # r[m] = sum_k x[k, m] / y[m]  =>  sum_k x[k, c] -> r[c] * y[c]   (not r[c] * y[m])
    rr = sp.IndexedBase("r", real=True)
    red = Reduction(rr, (m,), 1 / y[m], x[k, m], LIM)
    assert _apply("_fold_reduction", x[k, c], Simplifier([red])) == rr[c] * y[c]


@pytest.mark.parametrize(
    "coef, folds",
    [
        (sp.Rational(1, 3), True),  # a number
        (1 / K, True),  # a size
        (1 / y[m], True),  # a quotient: the fold multiplies by y[m]
        ((y[m] + 1) ** sp.Rational(-1, 2), True),  # rstd: times a root
        (sp.tanh(y[m]), False),  # 0 at y = 0: out / tanh(..) = 0 / 0
        (sp.exp(y[m]), False),  # positive, but rounds to 0 at y = -800
        (sp.Symbol("alpha", real=True), False),  # a param may be 0
        (2 * K * y[m] ** -1 * sp.tanh(y[m]), False),  # one unsafe factor is enough
    ],
)
def test_a_reduction_folds_back_only_where_its_coefficient_divides_safely(coef, folds) -> None:
    # name = coef * Sum_k body folds Sum_k body to name / coef: finite only where each factor of
    # coef is a nonzero float (tests/modules/test_stability.py: a tanh coefficient was 0 / 0)
    from derive.symbolic.canon import _divides_safely

    assert _divides_safely(coef, {K}) is folds


@pytest.mark.parametrize(
    "written, computed",
    [
        (sp.log(1 + x[n] ** 2), log1p(x[n] ** 2)),
        (sp.log(1 - x[n]), log1p(-x[n])),
        (sp.log(2 + x[n]), sp.log(2 + x[n])),  # not 1 + (1 + x): nothing gained
        (sp.exp(x[n]) - 1, expm1(x[n])),
        (y[n] + sp.exp(x[n]) - 1, y[n] + expm1(x[n])),
        (1 - sp.exp(-x[n]), -expm1(-x[n])),
        (3 * sp.exp(x[n]) - 3, 3 * expm1(x[n])),
        (sp.exp(x[n]) - 2, sp.exp(x[n]) - 2),  # the constant is not -c
        (K - K * sp.exp(x[n] / K), -K * expm1(x[n] / K)),  # -c a symbol (CELU's alpha)
        (  # log1mexp: expm1 near 0, log1p past log 2 (log(-expm1(-40)) was 0)
            sp.log(1 - sp.exp(-x[n])),
            where(-x[n] > -sp.log(2), sp.log(-expm1(-x[n])), log1p(-sp.exp(-x[n]))),
        ),
        (sp.exp(x[n]) / expm1(x[n]), -1 / expm1(-x[n])),  # 1 at x = 800: inf / inf was nan
        # a sum's rows are matched term by term: the exp whose -c is a term, whichever it is
        (2 * sp.exp(x[n]) + 3 * sp.exp(y[n]) - 3, 2 * sp.exp(x[n]) + 3 * expm1(y[n])),
        (2 * sp.exp(x[n]) + 3 * sp.exp(y[n]) - 2, 2 * expm1(x[n]) + 3 * sp.exp(y[n])),
        # ... and a term's factors one by one: the exp whose rest is the -c, whichever it is
        # (SymPy's matcher returns one assignment, e^y here, and the row declined it)
        (
            y[n] * sp.exp(x[n]) * sp.exp(y[n]) - y[n] * sp.exp(y[n]),
            y[n] * sp.exp(y[n]) * expm1(x[n]),
        ),
        (
            y[n] * sp.exp(x[n]) * sp.exp(y[n]) - y[n] * sp.exp(x[n]),
            y[n] * sp.exp(x[n]) * expm1(y[n]),
        ),
    ],
)
def test_the_accuracy_rows_compute_log1p_and_expm1(written, computed) -> None:
    assert rewrite(written, ACCURACY_RULES) == computed


# -- issue 13: where(), the mask rule, and remembering a tensor under any index names ------------
def test_where_derivative_is_the_mask() -> None:
    from derive.functions import where

    t1, t2 = sp.symbols("t1 t2", integer=True)
    v = sp.Symbol("v", real=True)
    assert sp.diff(where(t2 <= t1, 3 * v, -sp.oo), v) == where(t2 <= t1, 3, 0)
    assert where(sp.true, v, 0) == v and where(t2 <= t1, v, v) == v


def test_mask_beside_a_tensor_that_is_zero_off_it_is_dropped() -> None:
    # where(c, 1/sqrt(K), 0) exp(where(c, s, -inf) - mu) -> exp(...)/sqrt(K): exp(-inf) = 0
    from derive.functions import where

    cond = k <= n
    softmaxed = sp.exp(where(cond, x[n, k], -sp.oo) - mu[n])
    expr = where(cond, 1 / sp.sqrt(K), 0) * softmaxed
    assert Simplifier().simplify(expr) == softmaxed / sp.sqrt(K)
    # not off another condition, and not a mask whose branch is a tensor
    other = where(k < n, 1 / sp.sqrt(K), 0) * softmaxed
    assert Simplifier().simplify(other) == other
    tensor = where(cond, y[k], 0) * softmaxed
    assert Simplifier().simplify(tensor) == tensor


def test_masked_tensors_follow_the_definitions() -> None:
    # scores = where(t2 <= t1, s, -inf) -> counts = exp(scores - m) is 0 off t2 <= t1
    from derive import Op
    from derive.language import parse
    from derive.symbolic.simplify import masked_tensors

    g = parse(
        Op(
            "t",
            ["s[T, T]"],
            [
                "scores[a, b] = where(b <= a, s[a, b], -inf)",
                "counts[a, b] = exp(scores[a, b] - Max(scores[a, c], c))",
                "total[a] = Sum(counts[a, b], b)",
            ],
        )
    )
    masked = masked_tensors(g.steps, g.tensors)
    assert masked["scores"].value == -sp.oo and masked["counts"].value == 0
    assert "total" not in masked


def test_canonical_key_ignores_index_names() -> None:
    # dq's sum_d v[t1, d] g[t, d] and dk's sum_d v[t, d] g[t1, d]... are one tensor up to names
    from derive.lower.memo import canonical

    t, t1, d, e = sp.symbols("t t1 d e", integer=True)
    a = sp.Sum(x[t1, d] * y[t, d], (d, 0, K - 1))
    b = sp.Sum(x[t, e] * y[t1, e], (e, 0, K - 1))
    (ka, ra), (kb, rb) = canonical(a), canonical(b)
    assert ka == kb and ra[t1] == rb[t] and ra[t] == rb[t1]
    assert canonical(sp.Sum(x[t, d] * y[t, d], (d, 0, K - 1)))[0] != ka  # a diagonal is not


def test_every_sum_rule_has_its_case() -> None:
    # _fold_reduction and _fold_through_sum need a definition to read back: their tests above
    folds = {"_fold_reduction", "_fold_through_sum"}
    assert {case[0] for case in SUM_RULE_CASES} | folds == set(RULES)


# rows whose pattern needs values of its own: 3 + 3 tanh(x) -> 6 sigmoid(2 x), a number's term
# beside its tanh
OWN_VALUES = {
    "tanh-as-sigmoid": {"q": sp.Integer(3)},
}


@pytest.mark.parametrize("row", DEFINITION_RULES + FORWARD_RULES, ids=lambda row: row[0])
def test_each_identity_fires_on_its_own_pattern(row) -> None:
    name, pattern, build = row
    # a and c are the positive factors of log(a + c e^x): a sum with a square, a number
    values = {"r": y[n], "a": 2 + y[n] ** 2, "c": sp.Integer(3), "p": sp.S.One, "q": sp.Integer(-2)}
    values.update(OWN_VALUES.get(name, {}))
    bind = {w: values.get(w.name, x[n]) for w in pattern.atoms(sp.Wild)}
    assert build(bind) is not None
    assert rewrite(pattern.xreplace(bind), [row]) == build(bind)


def test_tanh_as_sigmoid_reads_either_sign_and_declines_a_lone_tanh() -> None:
    # 1 - tanh(x) = 2 sigma(-2x); 2 - 2 tanh(x) + y keeps y; 3 + tanh(x) and y tanh(x) + 1
    # hold no multiple of 1 + tanh and stay
    assert rewrite(1 - sp.tanh(x[n]), DEFINITION_RULES) == 2 * sigmoid(-2 * x[n])
    both = 2 - 2 * sp.tanh(x[n]) + y[n]
    assert rewrite(both, DEFINITION_RULES) == y[n] + 4 * sigmoid(-2 * x[n])
    for kept in (3 + sp.tanh(x[n]), y[n] * sp.tanh(x[n]) + 1):
        assert rewrite(kept, DEFINITION_RULES) == kept


def test_a_power_of_a_product_takes_the_factors_of_its_base() -> None:
    # (2 s)**(g - 1) s (1 - s) -> (2 s)**g (1 - s) / 2: finite where s underflows, g < 1
    from derive.lower.arithmetic import powers_over_their_base

    g = sp.Symbol("g", real=True)
    s = sigmoid(-2 * x[n])
    merged = powers_over_their_base((2 * s) ** (g - 1) * s * (1 - s) * y[n])
    assert merged == (2 * s) ** g * (1 - s) * y[n] / 2
    # (x y)**(g - 1) x**2 y -> (x y)**g x: each factor once, a power's surplus left
    assert powers_over_their_base((x[n] * y[n]) ** (g - 1) * x[n] ** 2 * y[n]) == (
        (x[n] * y[n]) ** g * x[n]
    )
    for kept in ((2 * s) ** (g - 1) * (1 - s), (x[n] * y[n]) ** (g - 1) * x[n]):
        assert powers_over_their_base(kept) == kept  # a factor of the base missing


def test_a_unit_float_coefficient_goes_only_where_the_product_is_a_float_tensors() -> None:
    from derive.identities import read_definition, unit_floats

    one = sp.Float(1.0)
    # 0.5 x (1 + tanh(u)) -> x sigmoid(2u), not 1.0 x sigmoid(2u)
    gelu = sp.Float(0.5) * x[n] * (1 + sp.tanh(y[n]))
    assert read_definition(gelu) == x[n] * sigmoid(2 * y[n])
    assert unit_floats(-one * x[n] * y[n]) == -x[n] * y[n]
    assert unit_floats(one * sp.exp(t[n])) == sp.exp(t[n])  # exp of an int is a float
    kept = one * t[n] * t[k]  # int tensors only: the 1.0 is what makes the product a float
    assert unit_floats(kept) == kept


def test_shifted_softplus_declines_a_factor_that_may_be_zero() -> None:
    # log(1 + y^2 e^x): y = 0 makes log(c) -inf, so the row must not fire
    e = sp.log(1 + y[n] ** 2 * sp.exp(x[n]))
    assert rewrite(e, DEFINITION_RULES) == e
    assert rewrite(sp.log(sp.exp(x[n]) + sp.exp(y[n])), DEFINITION_RULES) == x[n] + softplus(
        y[n] - x[n]
    )


# The folds of derive/symbolic/canon.py, one each: a backward expression read back through a
# definition of the forward (probs[n, c] = exp(l[n, c] - M[n]) / S[n], inv[m] = (var + eps)^-1/2)
P, L, MX, S = (sp.IndexedBase(s, real=True) for s in ("probs", "l", "M", "S"))
INV, VAR = sp.IndexedBase("inv", real=True), sp.IndexedBase("var", real=True)
EPS = sp.Symbol("eps", real=True)
PROBS = Pattern("probs", P, (n, c), sp.exp(L[n, c] - MX[n]) / S[n])
INVSTD = Pattern("inv", INV, (m,), (VAR[m] + EPS) ** sp.Rational(-1, 2))


@pytest.mark.parametrize(
    ("expr", "pattern", "folded"),
    [
        # exp(l - M) * S^-1 -> probs              (a product of powers, at other indices)
        (sp.exp(L[m, k] - MX[m]) / S[m] * x[m], PROBS, P[m, k] * x[m]),
        # (var + eps)^(-3/2) -> inv^3             (an integer power of the pattern)
        ((VAR[n] + EPS) ** sp.Rational(-3, 2) * y[n], INVSTD, INV[n] ** 3 * y[n]),
        # exp(l) sum_k x/S -> probs sum_k x       (a factor pulled into the sum, folded, out)
        (
            sp.exp(L[n, c] - MX[n]) * sp.Sum(x[k] / S[n], LIM),
            PROBS,
            P[n, c] * sp.Sum(x[k], LIM),
        ),
    ],
)
def test_fold(expr: sp.Expr, pattern: Pattern, folded: sp.Expr) -> None:
    assert fold(expr, [pattern]) == folded


# a normalisation written in one line, e[n, c] / Sum_m e[n, m]: its instances in a backward
# name the sum's index otherwise (the simplifier renames bound indices as it goes)
NORMALISED = Pattern("probs", P, (n, c), sp.exp(L[n, c]) / sp.Sum(sp.exp(L[n, m]), (m, 0, M - 1)))


@pytest.mark.parametrize(
    ("expr", "folded"),
    [
        # the whole instance, its sum over k where the pattern's is over m
        (sp.exp(L[n, c]) / sp.Sum(sp.exp(L[n, k]), LIM_M), P[n, c]),
        # a product holding it, at other free indices
        (x[c] * sp.exp(L[m, c]) / sp.Sum(sp.exp(L[m, k]), LIM_M), P[m, c] * x[c]),
    ],
)
def test_fold_reads_a_sum_whose_index_is_named_apart(expr: sp.Expr, folded: sp.Expr) -> None:
    # fuzz 7200256: not folded, the normalisation was recomputed at every read and two in a
    # chain were copied into each other (a backward of 1,051 operations, minutes to derive)
    assert fold(expr, [NORMALISED]) == folded


def test_fold_leaves_a_gathered_entry_of_a_normalisation_as_written() -> None:
    # probs[n, t[n]] would make the forward compute and keep all of probs for N entries
    picked = sp.exp(L[n, t[n]]) / sp.Sum(sp.exp(L[n, k]), LIM_M)
    assert fold(picked, [NORMALISED]) == picked


def test_fold_binds_no_index_its_pattern_sums_over() -> None:
    # bound at n = m, the pattern's Sum_m e[n, m] is the row m's sum; xreplace made it the
    # diagonal Sum_m e[m, m], and this, another value, was folded to probs[m, c]
    diagonal = sp.exp(L[m, c]) / sp.Sum(sp.exp(L[m, m]), (m, 0, M - 1))
    assert fold(diagonal, [NORMALISED]) == diagonal


def test_fold_finds_a_definition_in_the_form_the_rules_leave() -> None:
    # erf(log(sigmoid(a) exp(b))): the collapsed adjoint has been through the rules, which
    # split the log, and meets the body only as -erf(softplus(-a) - b)
    a, b = sp.symbols("a b", real=True)
    ERF = sp.IndexedBase("erfed", real=True)
    body = sp.erf(sp.log(sigmoid(x[n]) * sp.exp(y[n])))
    patterns = ruled_patterns([Pattern("erfed", ERF, (n,), body)], ruled)
    met = ruled(body.subs(n, m)) * x[m]
    assert met != body.subs(n, m) * x[m]  # the rules did change it
    assert fold(met, patterns) == ERF[m] * x[m]
    assert fold(met, patterns[:1]) == met  # the written body alone does not fold it


NEG, XY = sp.IndexedBase("neg", real=True), sp.IndexedBase("xy", real=True)


def test_fold_keeps_each_factor_inside_the_sum_that_binds_it() -> None:
    # -c sum_{k,m} x[m] y[k] -> sum_{k,m} c neg[m] y[k], folded, then out only what reads
    # neither k nor m: neg[m] stays under its sum (fuzz 96606 pulled it out with m free)
    two = sp.Sum(x[m] * y[k], LIM, (m, 0, M - 1))
    folded = fold(-NEG[c] * two, [Pattern("neg", NEG, (n,), -x[n])])
    assert folded == NEG[c] * sp.Sum(NEG[m] * y[k], LIM, (m, 0, M - 1))


def test_fold_moves_no_factor_into_a_sum_that_binds_its_index() -> None:
    # x[k] sum_k y[k]: the outer k is free, the inner one bound; moved in, x[k] y[k] would
    # fold to xy[k] and read the sum's k
    expr = x[k] * sp.Sum(y[k], LIM)
    assert fold(expr, [Pattern("xy", XY, (n,), x[n] * y[n])]) == expr


def test_a_lifted_call_over_a_diagonal_has_each_index_once() -> None:
    from derive.symbolic.saving import _free_indices

    n, o = sp.Symbol("n", integer=True), sp.Symbol("o", integer=True)
    x, t = sp.IndexedBase("x", real=True), sp.IndexedBase("t", integer=True)
    assert _free_indices(sp.exp(x[n, n, t[n, o]]), set()) == (n, o)


def test_a_where_decides_its_own_condition_inside_its_branches() -> None:
    """where(c, f(where(c, g, h)), e) -> where(c, f(g), e): inside the branch c holds (fuzz
    1147: a masked sum re-masked there was 0, its quotient 0 / 0, NaN to a second order); and
    not under a sum that binds the condition's index, where the same name is another index."""
    i = sp.Symbol("i", integer=True)
    c = i - 2 >= 0
    inner = sp.Sum(where(c, sp.exp(x[k]), 0), LIM)
    assert where(c, 1 / inner, 0) == where(c, 1 / sp.Sum(sp.exp(x[k]), LIM), 0)
    assert where(c, 0, y[n] * where(c, 1, 0) + 1) == where(c, 0, 1)
    bound = sp.Sum(where(c, x[i], 0), (i, 0, K - 1))  # its i is the sum's, not the branch's
    assert where(c, bound, 0).args[1] == bound


def test_a_product_that_is_zero_whether_a_condition_holds_or_not_is_zero() -> None:
    """where(c, 0, 1) where(c, 1, 0) f -> 0: one of where()'s two masks is 0 at every point (the
    second order multiplies them: fuzz --windows 9820, whose lowering then dropped the term and
    took its index for a lost axis). A mask whose condition the other settles counts too."""
    simplify = Simplifier().simplify
    cond = x[n] >= 0
    f = y[n] * sp.Sum(x[k] * t[k], LIM)
    assert simplify(where(cond, 0, 1) * where(cond, 1, 0) * f) == 0
    assert simplify(where(x[n] < 0, 1, 0) * where(cond, 1, 0) * f) == 0  # c written as not c
    # integers: k - n >= 3 and k - n <= 2 (written n - k >= -2; k > n + 2 and k < n + 3) never meet
    assert simplify(where(k - n >= 3, y[k], 0) * where(n - k >= -2, 1, 0)) == 0
    assert simplify(where(k > n + 2, 1, 0) * where(k < n + 3, y[k], 0) * f) == 0
    # masks in masks: 0 where cond holds; where it fails, 0 whether y[k] >= 0 or not (fuzz 700637)
    inner = y[k] >= 0
    assert (
        simplify(where(cond, 0, where(inner, 0, 1)) * where(cond, 0, where(inner, 1, 0)) * f) == 0
    )
    # kept: reals between 2 and 3; one mask; conditions on other expressions; both masks keep
    # the same case; an infinity in a case (-oo * 0 is nan there, not 0)
    for kept in [
        where(x[n] > 2, 1, 0) * where(x[n] < 3, 1, 0) * y[n],
        where(cond, 0, 1) * f,
        where(k - n >= 3, 1, 0) * where(k - n - K <= 2, 1, 0) * f,
        where(cond, 0, 1) * where(cond, y[n], 1) * f,
        where(cond, -sp.oo, 0) * where(cond, 0, 1) * y[n],
    ]:
        assert simplify(kept) == kept, kept


def test_a_min_or_max_is_built_once_per_argument_tuple() -> None:
    # a rename rebuilds minimum(z[..], tmp[..]) with the same arguments thousands of times; each
    # build compares its arguments (~2 ms for reads nothing orders: fuzz 660282 timed out)
    a, b = x[n, m], y[m, k]
    assert sp.Min(a, b) is sp.Min(a, b) and sp.Max(a, b) is sp.Max(a, b)
    assert sp.Min(a, b, 3).args == sp.Min(b, a, 3).args  # the result is still SymPy's own
    assert sp.Max(a, a + 1) == a + 1 and sp.Min(a, a + 1, evaluate=False).args == (a, a + 1)


def test_a_case_analysis_asks_each_condition_once() -> None:
    # one simplification asks the same conditions of every product it walks, and SymPy's sets
    # with symbolic ends take milliseconds each (fuzz --affine 2104: 55 of 88 s)
    from derive.symbolic.cases import implied

    K = sp.Symbol("K", integer=True, positive=True)
    c, d = sp.Ge(n, K + 2), sp.Le(n, K)
    assert implied(d, c, True) is False and implied(sp.Ge(n, K), c, True) is True
    before = implied.cache_info().hits
    assert implied(d, c, True) is False
    assert implied.cache_info().hits == before + 1


SPLIT_LOG_CASES = [
    # the exp's log splits off (exp(a) > 0), and the one factor left by an odd power
    (sp.log(sp.exp(x[n] - mu[n]) / y[n]), x[n] - mu[n] - sp.log(y[n])),
    (sp.log(2 * sp.exp(x[n]) * y[n]), x[n] + sp.log(2) + sp.log(y[n])),
    (sp.log(sp.sqrt(x[n])), sp.log(x[n]) / 2),
    # two factors of unknown sign, an even power, a negative number: as they stand
    (sp.log(x[n] * y[n]), sp.log(x[n] * y[n])),
    (sp.log(sp.exp(x[n]) * x[n] * y[n]), x[n] + sp.log(x[n] * y[n])),
    (sp.log(y[n] ** 2), sp.log(y[n] ** 2)),
    (sp.log(-2 * sp.exp(x[n]) / y[n]), x[n] + sp.log(-2 / y[n])),
    (sp.log(sp.exp(x[n]) + 1), sp.log(sp.exp(x[n]) + 1)),
]


@pytest.mark.parametrize(("expr", "expected"), SPLIT_LOG_CASES)
def test_split_logs_only_where_it_holds_for_every_real(expr: sp.Expr, expected: sp.Expr) -> None:
    assert split_logs(expr) == expected


def test_a_delta_moves_its_index_where_factors_then_cancel() -> None:
    from derive.symbolic.simplify import _delta_substituted

    # delta(c, t[n]) exp(x[n, c]) exp(-x[n, t[n]]) = delta(c, t[n]): 1 / p against its own e
    d = sp.KroneckerDelta(c, t[n])
    assert _delta_substituted(d * sp.exp(x[n, c]) * sp.exp(-x[n, t[n]])) == d
    # nothing cancels: left as it is
    kept = d * sp.exp(x[n, c]) * y[n]
    assert _delta_substituted(kept) == kept
    # c rebound by a sum inside: not substituted (it would rename the sum's own index)
    inner = sp.Sum(sp.exp(x[n, c]) * sp.exp(-x[n, t[n]]), (c, 0, K - 1))
    assert _delta_substituted(d * inner) == d * inner


def test_only_the_terms_whose_exps_cancel_are_multiplied_out() -> None:
    from derive.symbolic.simplify import cancel_exps

    u, a, b = sp.symbols("u a b")
    # exp(u) (a + b exp(-u)) = a exp(u) + b: the exp(-u) (inf where exp(u) underflows) goes
    assert cancel_exps(sp.exp(u) * (a + b * sp.exp(-u)), Simplifier().simplify) == (
        a * sp.exp(u) + b
    )
    # no term has fewer exps multiplied out: the product keeps its shape
    kept = (sp.exp(u) + a) * (sp.exp(2 * u) + b)
    assert cancel_exps(kept, Simplifier().simplify) == kept


def test_a_product_is_multiplied_into_the_terms_whose_reciprocals_it_cancels() -> None:
    from derive.symbolic.simplify import cancel_exps

    i = sp.Symbol("i", integer=True)
    p, t, q = sp.IndexedBase("p")[i], sp.IndexedBase("t")[i], sp.IndexedBase("q")[i]
    # p (1 - p) ((1 - t) / (1 - p) - t / p) q: 1 / (1 - p) and 1 / p (inf at p = 1 and
    # p = 0) go, the factors they cancel into stay unexpanded
    e = p * (1 - p) * (((1 - t) / (1 - p) - t / p) * q + t)
    out = cancel_exps(e, Simplifier().simplify)
    assert not any(f.exp.is_negative for f in out.atoms(sp.Pow)), out
    assert sp.cancel(out - e) == 0
    # (1 - p)**g / (p - 1) -> -(1 - p)**(g - 1): a reciprocal of a negated base merged
    g = sp.Symbol("g", real=True)
    merged = cancel_exps(q * (1 - p) ** g / (p - 1), Simplifier().simplify)
    assert merged == -q * (1 - p) ** (g - 1)
    # a reciprocal the rest of the product does not hold is left alone
    kept = q * (t / (1 - p) + p)
    assert cancel_exps(kept, Simplifier().simplify) == kept


def test_a_divisor_that_cancels_in_a_gates_kept_branch_goes_inside_it() -> None:
    """where(x > 0, x, 0) / x is where(x > 0, 1, 0) wherever x != 0 (and 0 / 0 at x = 0,
    where the gate drops its branch): the backward of where(x > 0, x log(x), 0) holds it, and
    its second order was NaN at x = 0. A divisor that is no factor of the branch stays."""
    from derive.symbolic.cases import gate_divided

    x, y = (sp.IndexedBase(n)[sp.Symbol("n", integer=True)] for n in "xy")
    c = x > 0
    assert gate_divided(where(c, x, 0) / x) == where(c, 1, 0)
    assert gate_divided(where(c, y * x**2, 0) * y / x) == where(c, y * x, 0) * y
    assert gate_divided(where(c, y, 0) / x) == where(c, y, 0) / x
    assert gate_divided(where(c, 0, x) / x) == where(c, 0, x) / x  # kept where c fails


def test_equal_reads_read_a_factor_at_the_other_side_of_the_equality() -> None:
    # sum_k where(seg[n] == seg[k], 1, 0) x[k] / den[seg[k]]: where the guard holds seg[k] is
    # seg[n], so 1 / den[seg[k]] is 1 / den[seg[n]], and the simplifier takes it out
    guard = where(sp.Eq(SEG[n], SEG[k]), 1, 0)
    got = _apply("_equal_reads", guard * x[k] / DEN[SEG[k]])
    assert got == sp.Sum(guard * x[k], LIM) / DEN[SEG[n]]
    # a delta between the two reads is the same guard
    delta = sp.KroneckerDelta(SEG[n], SEG[k])
    assert _apply("_equal_reads", delta * x[k] / DEN[SEG[k]]) == sp.Sum(delta * x[k], LIM) / (
        DEN[SEG[n]]
    )


def test_equal_reads_decline_a_side_the_sum_may_never_reach() -> None:
    guard = where(sp.Eq(SEG[n], SEG[k]), 1, 0)
    # a factor that still reads k stays as written (exp(x[k] - mx[seg[k]]) is the forward's)
    assert _apply("_equal_reads", guard * x[k] * y[SEG[k] + k]) is None
    # g may be an empty segment: 1 / den[g] outside the sum would be 0 * inf
    g = sp.Symbol("g", integer=True)
    assert _apply("_equal_reads", where(sp.Eq(g, SEG[k]), 1, 0) * x[k] / DEN[SEG[k]]) is None
    # a sum over part of seg's axis may miss n's own entry: the same
    part = (k, 0, K - 2)
    body = guard * x[k] / DEN[SEG[k]]
    assert RULES["_equal_reads"](body, part, Simplifier()) is None
