"""The argmax of a Max over several indices: one int, the maximising indices in mixed radix.

``m[I] = Max(f, p, q)`` is kept whole (not lifted into a Max over q, then one over p), and the
forward saves one int per entry of m, the position of its maximum,

    a = p*M + q,    picks:  p = floor(a/M),  q = Mod(a, M)

(three indices: ``a = (p*M1 + q)*M2 + r``, and so on), so the derivative of the Max is the
product of two deltas, ``delta(p, floor(a/M)) * delta(q, Mod(a, M))``, for the simplifier to
eliminate like any other. Why a radix M and not simply the range of q: for a window read
``x[.., S*i + p, S*j + q]`` the radix is x's row length W, so that the scatter index of the
adjoint, ``(S*i + floor(a/W))*W + S*j + Mod(a, W)``, folds (``floor(a/M)*M + Mod(a, M) = a``)
into ``S*i*W + S*j + a``: no division at run time, and ``a`` is torch's own max_pool index
less the window's origin. An index read any other way takes its range as its radix.

Why one int and not a tuple of argmaxes (one per index) that the lowering would encode: one
int is what the forward saves and the double backward takes as an input, so reverse mode,
forward mode and the second order see one argmax tensor per Max as before, only its picks
change; and the fold is an identity on the symbolic index, proven once, not a pattern the
lowering must find in code.

A radix must be at least its index's range, or two positions would share a code: a window's
``W >= K`` holds wherever the window fits in x, and the forward checks it (:func:`radix_checks`).
A Max over one index keeps ``a = c`` itself: nothing changes for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.language.graph import ReduceMax


def _extent(lim: tuple) -> sp.Expr:
    var, lo, hi = lim
    return hi - lo + 1


def _radix(body: ReduceMax, lim: tuple) -> sp.Expr:
    """The radix of one index after the first: the axis it reads along when the body is one
    read and the index is in one subscript, with coefficient 1 and no offset (``x[.., S*j +
    q]``: W), else its range. With an offset (``S*j + q - P``) a window may be wider than x
    (K > W, zero padding on both sides): its range then, so that no op is refused."""
    var = lim[0]
    f = body.function
    if isinstance(f, sp.Indexed):
        at = [k for k, sub in enumerate(f.indices) if sub.has(var)]
        if len(at) == 1 and f.base.shape is not None:
            sub = sp.expand(f.indices[at[0]])
            rest = sp.expand(sub - var)
            if sub.coeff(var) == 1 and not rest.has(*[v for v, *_ in body.limits]):
                if all(_has_index(term) for term in sp.Add.make_args(rest) if rest != 0):
                    return f.base.shape[at[0]]
    return _extent(lim)


def _has_index(term: sp.Expr) -> bool:
    """A term of a subscript that moves with an index (``S*j``), not a constant offset (an
    index is an integer symbol not known positive; sizes are positive, params unassumed)."""
    return any(s.is_integer and not s.is_positive for s in term.free_symbols)


def radices(body: ReduceMax) -> tuple[sp.Expr, ...]:
    """One radix per index after the first (empty for a Max over one index)."""
    return tuple(_radix(body, lim) for lim in body.limits[1:])


def digits(rad: tuple, a: sp.Expr) -> tuple[sp.Expr, ...]:
    """``a``'s digits in the mixed radix ``rad`` (one radix per digit after the first):
    ``(floor(a/M), Mod(a, M))`` for one radix, ``(a,)`` for none."""
    out = []
    for k in range(len(rad) + 1):
        below = sp.Mul(*rad[k:])  # the product of the radices of the digits after k
        digit = sp.floor(a / below) if k < len(rad) else a
        out.append(sp.Mod(digit, rad[k - 1]) if k > 0 else digit)
    return tuple(out)


def picks(body: ReduceMax, a: sp.Expr) -> tuple[sp.Expr, ...]:
    """The value of each index of the Max at its argmax ``a``: its digits, each from its
    index's low limit."""
    return tuple(lim[1] + d for lim, d in zip(body.limits, digits(radices(body), a), strict=True))


def encode(body: ReduceMax, offsets: tuple) -> sp.Expr:
    """The argmax of the Max whose indices stand ``offsets`` past their low limits."""
    a = sp.S.Zero
    for k, off in enumerate(offsets):
        a = a * (radices(body)[k - 1] if k > 0 else 1) + off
    return a


def largest(body: ReduceMax) -> sp.Expr:
    """The largest argmax: every index at its last value."""
    return encode(body, tuple(hi - lo for _, lo, hi in body.limits))


def radix_checks(body: ReduceMax) -> list[tuple[sp.Expr, sp.Expr, sp.Expr]]:
    """(radix - range + 1, the radix, the range) for each radix that is not its index's own
    range: it must be positive at run time, or two positions would share one argmax."""
    return [
        (r - _extent(lim) + 1, r, _extent(lim))
        for r, lim in zip(radices(body), body.limits[1:], strict=True)
        if sp.expand(r - _extent(lim)) != 0
    ]


@dataclass(frozen=True)
class Digits:
    """What is known of a saved argmax's values (a Max over several indices): each digit's
    largest value, for the lowering's proofs that an index built from one stays in range."""

    radices: tuple[sp.Expr, ...]
    highs: tuple[sp.Expr, ...]

    @staticmethod
    def of(body: ReduceMax) -> Digits:
        return Digits(radices(body), tuple(hi - lo for _, lo, hi in body.limits))

    def high(self, f: sp.Expr, a: sp.Expr) -> sp.Expr | None:
        """The largest value of ``f`` if it is a digit of the argmax read ``a``, else None."""
        found = [h for d, h in zip(digits(self.radices, a), self.highs, strict=True) if d == f]
        return found[0] if found else None


def largest_of(d: Digits) -> sp.Expr:
    """The largest argmax, every digit at its largest."""
    a = sp.S.Zero
    for k, h in enumerate(d.highs):
        a = a * (d.radices[k - 1] if k > 0 else 1) + h
    return a


def _quotient(f: sp.Expr) -> tuple[sp.Expr, sp.Expr] | None:
    """(x, D) of ``floor(x/D)``, nested floors flattened: floor(floor(x/N)/M) = floor(x/(N M))
    for positive integers N, M."""
    if not isinstance(f, sp.floor):
        return None
    num, den = sp.fraction(sp.together(f.args[0]))
    inner = _quotient(num)
    return (inner[0], inner[1] * den) if inner is not None else (num, den)


def fold_digits(e: sp.Expr) -> sp.Expr:
    """``floor(x/M)*M + Mod(x, M) -> x`` (times any coefficient c), to a fixed point: an index
    built from an argmax's digits, ``(S*i + floor(a/W))*W + S*j + Mod(a, W)``, folds to
    ``S*i*W + S*j + a``, with no division left to run."""
    e = sp.expand(e)
    while True:
        terms = list(sp.Add.make_args(e))
        done = True
        for t in terms:
            mods = [f for f in sp.Mul.make_args(t) if isinstance(f, sp.Mod)]
            if len(mods) != 1:
                continue
            (mod,) = mods
            x, m = mod.args
            c = t / mod
            for u in terms:
                floors = [f for f in sp.Mul.make_args(u) if isinstance(f, sp.floor)]
                if len(floors) != 1:
                    continue
                q = _quotient(floors[0])
                outer = _quotient(x) if isinstance(x, sp.floor) else (x, sp.S.One)
                if q is None or outer is None or q[0] != outer[0]:
                    continue
                if sp.expand(q[1] - outer[1] * m) != 0 or sp.expand(u / floors[0] - c * m) != 0:
                    continue
                e = sp.expand(e - t - u + c * x)
                done = False
                break
            if not done:
                break
        if done:
            return e
