"""The argmax of a Max over several indices (derive.language.argmax), one rule a test: its
radix, its encoding and picks, the fold of its digits, the bounds of its digits, the delta
elimination that needs no range condition against a digit, and reverse mode's picks."""

from __future__ import annotations

import itertools

import sympy as sp

from derive import Op
from derive.language import parse
from derive.language.argmax import Digits, digits, encode, fold_digits, radices, radix_checks
from derive.lower import bounds
from derive.symbolic.reverse import derive_adjoints
from derive.symbolic.simplify import SUM_RULES, Simplifier

i, j, n, k = sp.symbols("i j n k", integer=True)
S = sp.Symbol("S")
W, K, M1, M2, HO = sp.symbols("W K M1 M2 HO", integer=True, positive=True)
a = sp.IndexedBase("a", integer=True)[i, j]
x = sp.IndexedBase("x", real=True)
RANGES = {"p": "K", "q": "K", "i": "HO", "j": "WO"}
SIZES = {"K": "kernel", "HO": "(H - kernel) // S + 1", "WO": "(W - kernel) // S + 1"}


def _max(definition: str, **sizes: str) -> sp.Expr:
    """The body of the op's one Max, as parsed."""
    op = Op(
        "t",
        ["x[N, C, H, W]"],
        [definition],
        params={"kernel": 2, "S": 2, "P": 1},
        sizes={**SIZES, **sizes},
        ranges=RANGES,
    )
    return parse(op).steps[-1].body


def test_a_window_reads_radix_is_its_row_length_and_an_offset_windows_its_range() -> None:
    pool = _max("out[n, c, i, j] = Max(x[n, c, S*i + p, S*j + q], p, q)")
    assert len(pool.limits) == 2  # kept whole: no lifted Max over q
    assert radices(pool) == (sp.Symbol("W", integer=True, positive=True),)
    assert radix_checks(pool)  # W >= K is checked at run time
    padded = _max("out[n, c, i, j] = Max(x[n, c, S*i + p, S*j + q - P], p, q)")
    assert radices(padded) == (padded.limits[1][2] + 1,) and not radix_checks(padded)


def test_encode_and_digits_are_inverse_in_row_major_order() -> None:
    codes = []  # three indices of ranges 2, 3, 4, their radices (3, 4)
    for p, q, r in itertools.product(range(2), range(3), range(4)):
        code = (p * 3 + q) * 4 + r
        assert tuple(int(d) for d in digits((3, 4), sp.Integer(code))) == (p, q, r)
        codes.append(code)
    assert codes == sorted(codes) and len(set(codes)) == 24  # row-major, no two alike


def test_encode_is_the_mixed_radix_of_the_max_indices() -> None:
    pool = _max("out[n, c, i, j] = Max(x[n, c, S*i + p, S*j + q], p, q)")
    p, q = sp.symbols("p q", integer=True)
    (radix,) = radices(pool)
    assert sp.expand(encode(pool, (p, q)) - (p * radix + q)) == 0


def test_fold_digits_removes_the_division_from_a_scatter_index() -> None:
    p, q = digits((W,), a)
    # (S*i + floor(a/W))*W + S*j + Mod(a, W) -> S*i*W + S*j + a
    assert fold_digits((S * i + p) * W + S * j + q) == sp.expand(S * i * W + S * j + a)
    # three digits: floor(a/(M1 M2)) M1 M2 + Mod(floor(a/M2), M1) M2 + Mod(a, M2) -> a
    d0, d1, d2 = digits((M1, M2), a)
    assert fold_digits(d0 * M1 * M2 + d1 * M2 + d2) == a


def test_fold_digits_leaves_what_is_not_the_identity() -> None:
    p, q = digits((W,), a)
    for e in (p * W + 2 * q, p * K + q, p * W, q + p):
        assert fold_digits(e) == sp.expand(e)


def test_an_argmax_digits_bounds_are_its_indices_ranges() -> None:
    data = {"a": Digits((W,), (K - 1, K - 1))}
    ranges = {i: (sp.S.Zero, HO - 1)}
    p, q = digits((W,), a)
    found = bounds.interval(S * i + p, ranges, data, {}, {"S"})
    assert found is not None and sp.expand(found[1] - (S * (HO - 1) + K - 1)) == 0
    assert bounds.interval(q, ranges, data, {}, {"S"}) == (0, K - 1)
    assert bounds.interval(a, ranges, data, {}, {"S"}) == (0, (K - 1) * W + K - 1)
    # no digit of a known argmax: Mod(a, K) and floor(a/K) have no bound from this data
    assert bounds.interval(sp.Mod(a, K), ranges, data, {}, {"S"}) is None
    assert bounds.interval(sp.floor(a / K), ranges, {"a": K * W - 1}, {}, {"S"}) is None


def test_a_delta_against_an_argmax_digit_needs_no_range_condition() -> None:
    rule = next(r for r in SUM_RULES if r.__name__ == "_delta_eliminate")
    t = sp.IndexedBase("t", integer=True)[n]
    lim = (k, 0, K - 1)
    for d in digits((W,), t):  # in k's range by construction: no where()
        assert rule(x[k] * sp.KroneckerDelta(k, d), lim, Simplifier()) == x[d]
    # floor(2 t/W) is no digit: its range must be shown, as any expression's
    twice = sp.floor(2 * t / W)
    assert rule(x[k] * sp.KroneckerDelta(k, twice), lim, Simplifier()) != x[twice]


def test_reverse_mode_picks_one_argmax_over_two_indices() -> None:
    op = Op(
        "t",
        ["x[N, C, H, W]"],
        ["out[n, c, i, j] = Max(x[n, c, S*i + p, S*j + q], p, q)"],
        params={"kernel": 2, "S": 2},
        sizes=SIZES,
        ranges=RANGES,
    )
    g = parse(op)
    adj = derive_adjoints(g)
    (am,) = adj.argmax.values()
    assert am.integer and am.dims == g.tensors["out"].dims
    deltas = adj.exprs["x"].atoms(sp.KroneckerDelta)
    assert any(d.has(sp.floor) for d in deltas) and any(d.has(sp.Mod) for d in deltas)
