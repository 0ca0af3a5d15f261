"""Lowering of window contractions (issue 25): a Sum of two tensor reads whose indices meet
through affine subscripts, or through deltas, is a convolution, printed as one torch kernel;
so is a Sum of one read over a window (or under a window's indicators), with a kernel of ones.

The rules, one row each of :data:`WINDOWS`; every row that matches gives a candidate, and
:func:`plan_window` takes the one that reads its operands and writes its result in their
stored layouts (fewest permutes and flips: each is a copy of a whole tensor), ties to the
earlier row. A Sum no rule matches keeps the generic lowering (index grids, clamped into the
axis and masked to 0 outside):

- correlation: ``sum_{c,k} X[b, g, c, a*t + d*k + p] W[g, o, c, k]``
  -> ``conv(X, W, stride=a, dilation=|d|, padding=-p, groups=G)``, W flipped along k where d < 0
- weight gradient: the same sum with X stored ``[c, g, b, ...]`` and W ``[c, g, o, ...]`` (the
  summed c first: a batch) -> ``conv_weight(X, (G*O, B, T), W, stride=d, dilation=a,
  padding=-p)``, the correlation as the weight gradient of the convolution of X that W is the
  output gradient of: both read in place, where the correlation would transpose both
- transposed read: ``sum_{c,l} Y[b, c, l] X[c, o, +-(t - s*l) + p]``
  -> ``conv_transpose(Y, X, stride=s)``, X flipped where t enters with -1
- correlated read: ``sum_{c,l} Y[b, c, l] X[o, c, +-(l - s*t) + p]`` -> ``conv(Y, X,
  stride=s, padding=-p)``, X flipped where l enters with -1
- transposed: ``sum_{c,l,k} X[b, g, c, l] W[g, c, o, k] delta(t, s*l + d*k + p)``
  -> ``conv_transpose(X, W, stride=s, dilation=d, groups=G)``
- window sum: ``sum_k X[b, a*t + d*k + p]`` (a pool's window summed) -> ``conv(X, ones(K),
  stride=a, dilation=d, padding=-p)``, a kernel of ones, every other axis of X a group of its
  own (a depthwise kernel: torch's CPU kernels run it several times faster than the same as a
  batch of one-channel images)
- window indicator: ``sum_l Y[b, l] [0 <= t - s*l + p <= K - 1]`` (a window Sum's adjoint: each
  t gets the Y[l] whose windows cover it) -> ``conv_transpose(Y, ones(K), stride=s,
  padding=p)``, the indicator read as a kernel of ones; and
  ``sum_l Y[b, l] [0 <= l - s*t + p <= K - 1]`` (a window Sum written with an indicator)
  -> ``conv(Y, ones(K), stride=s, padding=p)``; depthwise as above

Each index has one role, read off the tensors it subscripts: b (X and the result: the batch),
g (X, W and the result: a group), c (X and W, summed: the channels contracted), o (W and the
result: the output channels), and per spatial axis the result's t and the window k (and X's l,
transposed). Several indices may share a role (flattened into one axis, reshaped back after).
Nothing here knows an op: the forward's convolution, x's adjoint (transposed, or a correlation
with the kernel flipped where the inversion solved the read) and w's adjoint (x correlated with
grad_out) are derived by the engine; these rules only recognise the shape of a contraction.
A param coefficient (a stride, a dilation) counts as positive: torch refuses one that is not.

The zero padding of the read goes to torch's ``padding=`` (both ends of an axis alike) where
:mod:`derive.lower.bounds` shows it is the same read: the window starts at or after ``-P`` and
never runs past ``size + P``. Elsewhere X is padded and cropped explicitly (:class:`Pad`,
:class:`Narrow`): never a read past the tensor, whatever the sizes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp

from derive.functions import where
from derive.ir import nodes as ir
from derive.lower.bounds import at_most, equal
from derive.lower.context import Context
from derive.lower.value import Scope, plain, position


@dataclass(frozen=True)
class Spatial:
    """One spatial axis: the result's ``out`` at X's axis ``at`` (read at ``stride * out +
    dilation * window + offset`` when correlated), W's ``window`` index, flipped or not."""

    out: sp.Symbol
    at: int
    window: sp.Symbol | None
    kernel_at: int  # W's axis (read by ``window``, or by an affine subscript: flipped)
    stride: sp.Expr
    dilation: sp.Expr
    offset: sp.Expr
    flip: bool = False


@dataclass(frozen=True)
class Window:
    """A Sum recognised as a convolution of ``x`` (the input) with ``w`` (the kernel), printed
    as ``form``: "conv", "transposed" (conv_transpose) or "weight" (a weight gradient)."""

    form: str
    x: sp.Indexed
    w: sp.Indexed
    batch: tuple[sp.Symbol, ...]
    groups: tuple[sp.Symbol, ...]
    channels: tuple[sp.Symbol, ...]
    outs: tuple[sp.Symbol, ...]
    spatial: tuple[Spatial, ...]
    ones: bool = False  # w is no tensor: a kernel of ones (a window indicator), built here

    @property
    def transposed(self) -> bool:
        return self.form == "transposed"

    @property
    def axes(self) -> tuple[sp.Symbol, ...]:
        """The result's axes, in the order the kernel writes them."""
        first = (
            self.groups + self.outs + self.batch
            if self.form == "weight"
            else self.batch + self.groups + self.outs
        )
        return first + tuple(s.out for s in self.spatial)


def _window(form: str, x, w, roles: tuple, spatial: list, ones: bool = False) -> Window:
    """A plan, its spatial axes in X's order (then X needs no permute for them)."""
    return Window(form, x, w, *roles, tuple(sorted(spatial, key=lambda s: s.at)), ones)


# -- matching: pure, on the Sum and the scope -------------------------------------------------
def plan_window(scope: Scope, e: sp.Sum) -> Window | None:
    """The convolution ``e`` is: of the rows of :data:`WINDOWS` that match, the candidate with
    the fewest copies of whole tensors (:func:`layout_cost`), the earlier row on a tie; or None."""
    flat = flattened(e)
    if flat is None:
        return None
    factors, limits = flat
    found = []
    for _name, match, _identity in WINDOWS:
        for plan in match(scope, factors, [lim[0] for lim in limits]):
            if _whole(plan, limits) and _free(plan) == _free_of(scope, e):
                found.append(plan)
    return min(found, key=lambda p: layout_cost(scope, p), default=None)


def layout_cost(scope: Scope, plan: Window) -> int:
    """How many whole tensors the kernel copies first: X or W read out of their stored axis
    order (a permute torch makes contiguous), W flipped, the result written in an order other
    than the one wanted."""
    if plan.form == "weight":
        x_roles, w_roles = plan.channels + plan.groups + plan.batch, plan.channels + plan.groups
        w_roles += plan.outs
    elif plan.transposed:
        x_roles = plan.batch + plan.groups + plan.channels
        w_roles = plan.groups + plan.channels + plan.outs
    else:
        x_roles = plan.batch + plan.groups + plan.channels
        w_roles = plan.groups + plan.outs + plan.channels
    x_at = [_at(plan.x, i) for i in x_roles] + [s.at for s in plan.spatial]
    w_roles = () if plan.ones else w_roles  # built in its own order
    w_at = [_at(plan.w, i) for i in w_roles] + [s.kernel_at for s in plan.spatial]
    axes = list(plan.axes)
    cost = (x_at != sorted(x_at)) + (w_at != sorted(w_at)) + any(s.flip for s in plan.spatial)
    return cost + (axes != sorted(axes, key=position(list(scope.order))))


def flattened(e: sp.Sum) -> tuple[list, list] | None:
    """sum_i f sum_j g -> the factors f, g and the limits of i and j: one product."""
    coef, rest = e.function.as_coeff_Mul()
    if coef != 1:
        return None
    factors, limits = [], list(e.limits)
    for f in sp.Mul.make_args(rest):
        if not isinstance(f, sp.Sum):
            factors.append(f)
            continue
        inner = flattened(f)
        if inner is None or {lim[0] for lim in inner[1]} & {lim[0] for lim in limits}:
            return None
        factors += inner[0]
        limits += inner[1]
    return factors, limits


def _whole(plan: Window, limits: list) -> bool:
    """Each summed index runs over the whole axis it subscripts (0 to its size - 1)."""
    for var, lo, hi in limits:
        sizes = [
            t.base.shape[k] for t in (plan.x, plan.w) for k, i in enumerate(t.indices) if i == var
        ]
        if lo != 0 or not sizes or any(sp.expand(hi + 1 - s) != 0 for s in sizes):
            return False
    return True


def _free(plan: Window) -> set:
    return set(plan.batch + plan.groups + plan.outs) | {s.out for s in plan.spatial}


def _free_of(scope: Scope, e: sp.Sum) -> set:
    return {s for s in e.free_symbols if scope.is_axis(s)}


def _sign(scope: Scope, c: sp.Expr) -> int | None:
    """+1 or -1 for a coefficient of known sign; a param's (real, not a size) counts as +."""
    if c.is_positive:
        return 1
    if c.is_negative:
        return -1
    number, rest = c.as_coeff_Mul()  # a number times params: 2*S, -D
    params = sp.Mul.make_args(rest)
    if number != 0 and all(
        isinstance(s, sp.Symbol) and s.name in scope.scalars and not s.is_integer for s in params
    ):
        return 1 if number > 0 else -1
    return None


def _distinct_axes(scope: Scope, t: sp.Indexed) -> bool:
    return (
        plain(t)
        and all(scope.is_axis(i) for i in t.indices)
        and len(set(t.indices)) == len(t.indices)
    )


def _roles(plain_x: list, plain_w: list, bound: list) -> tuple | None:
    """(batch, groups, channels, outs) of the indices X and W subscript plainly."""
    xs, ws = set(plain_x), set(plain_w)
    if len(xs) != len(plain_x) or len(ws) != len(plain_w) or (xs ^ ws) & set(bound):
        return None
    batch = tuple(i for i in plain_x if i not in ws)
    groups = tuple(i for i in plain_x if i in ws and i not in bound)
    channels = tuple(i for i in plain_x if i in ws and i in bound)
    return batch, groups, channels, tuple(i for i in plain_w if i not in xs)


def _match_correlation(scope: Scope, factors: list, bound: list) -> list[Window]:
    """sum_{c,k} X[b, g, c, a*t + d*k + p] W[g, o, c, k]: X read through affine subscripts."""
    if len(factors) != 2 or not all(isinstance(f, sp.Indexed) for f in factors):
        return []
    found = []
    for x, w in (factors, factors[::-1]):
        if plain(x) or not _distinct_axes(scope, w):
            continue
        plain_x = [i for i in x.indices if scope.is_axis(i)]
        spatial = [_window_read(scope, s, at, w, bound) for at, s in enumerate(x.indices)]
        spatial = [s for s in spatial if s is not None]
        if len(plain_x) + len(spatial) != len(x.indices):
            continue
        windows, outs = [s.window for s in spatial], [s.out for s in spatial]
        used = set(plain_x) | set(w.indices) - set(windows)
        if len(set(windows)) != len(windows) or len(set(outs)) != len(outs) or used & set(outs):
            continue
        if set(windows) & set(plain_x):
            continue
        roles = _roles(plain_x, [i for i in w.indices if i not in windows], bound)
        if roles is not None and set(bound) == set(roles[2]) | set(windows):
            found.append(_window("conv", x, w, roles, spatial))
    return found


def _match_weight(scope: Scope, factors: list, bound: list) -> list[Window]:
    """A correlation printed as a weight gradient, where its padding is torch's and the sizes
    are the ones that kernel checks (:func:`_weight_sizes`); W never flipped (W is the big
    tensor here, the output gradient)."""
    return [
        dataclasses.replace(p, form="weight")
        for p in _match_correlation(scope, factors, bound)
        if not any(s.flip for s in p.spatial) and _weight_sizes(scope, p)
    ]


def _weight_sizes(scope: Scope, plan: Window) -> bool:
    """conv_weight(X, size, W) reads X padded by q = -p at both ends and checks that W's
    spatial size L is the output size of the convolution it is the gradient of:
    ``L == (size + 2q - a*(T - 1) - 1) // d + 1``, the kernel's extent being T (dilated by
    a) and its stride d. Shown, with q >= 0, for every size (:mod:`derive.lower.bounds`)."""
    for s in plan.spatial:
        size, q = plan.x.base.shape[s.at], -s.offset
        t_size, w_size = scope.sizes.get(s.out), plan.w.base.shape[s.kernel_at]
        if t_size is None or not at_most(0, q, scope.derived, scope.scalars):
            return False
        consistent = sp.floor((size + 2 * q - s.stride * (t_size - 1) - 1) / s.dilation) + 1
        if not equal(w_size, consistent, scope.derived, scope.scalars):
            return False
    return True


def _match_read_transposed(scope: Scope, factors: list, bound: list) -> list[Window]:
    """sum_{c,l} Y[b, c, l] X[c, o, +-(t - s*l) + p], s > 0 (an adjoint's read of a kernel):
    with i the kernel's index, t = s*l + i - p, or t = s*l + i' + p - (I - 1) with
    i' = I - 1 - i when t enters with -1; so a conv_transpose of Y with X (flipped in the
    second case) as its kernel."""
    return _kernel_reads(scope, factors, bound, "transposed")


def _match_read_correlated(scope: Scope, factors: list, bound: list) -> list[Window]:
    """sum_{c,l} Y[b, c, l] X[o, c, +-(l - s*t) + p], s > 0 (the kernel read where Y's
    summed index meets the result's: a correlation's adjoint taken twice): with i the
    kernel's index, l = s*t + i - p, or l = s*t + i' + p - (I - 1) with i' = I - 1 - i when
    l enters with -1; so Y correlated with X (flipped in the second case). Both sides read
    zeros outside their axes (the language's padding, torch's), so the pairs (l, i) summed
    are the same."""
    return _kernel_reads(scope, factors, bound, "conv")


def _kernel_reads(scope: Scope, factors: list, bound: list, form: str) -> list[Window]:
    """The plans of ``sum Y[..] X[.., affine, ..]`` with Y's subscripts plain, X read at an
    affine of Y's summed index and the result's: ``form`` "transposed" where the result's
    index enters with +-1, "conv" where Y's does (:func:`_kernel_read`)."""
    if len(factors) != 2 or not all(isinstance(f, sp.Indexed) for f in factors):
        return []
    found = []
    for kernel, y in (factors, factors[::-1]):
        if plain(kernel) or not _distinct_axes(scope, y):
            continue
        spatial = [
            _kernel_read(scope, sub, at, kernel, y, bound, form)
            for at, sub in enumerate(kernel.indices)
        ]
        spatial = [s for s in spatial if s is not None]
        plain_k = [i for i in kernel.indices if scope.is_axis(i)]
        if not spatial or len(plain_k) + len(spatial) != len(kernel.indices):
            continue
        windows, outs = {s.window for s in spatial}, {s.out for s in spatial}
        if len(windows) != len(spatial) or len(outs) != len(spatial):
            continue
        if (set(plain_k) | set(y.indices)) & outs or windows & set(plain_k):
            continue
        roles = _roles([i for i in y.indices if i not in windows], plain_k, bound)
        if roles is not None and set(bound) == set(roles[2]) | windows:
            found.append(_window(form, y, kernel, roles, spatial))
    return found


def _free_and_summed(scope: Scope, sub: sp.Expr, owner: sp.Indexed, bound: list):
    """``(expanded sub, t, k)`` for an affine subscript over one free axis t and one summed
    axis k that ``owner`` (the other operand) also reads; None for any other subscript."""
    if scope.is_axis(sub) or sub.has(sp.Indexed) or not isinstance(sub, (sp.Add, sp.Mul)):
        return None
    e = sp.expand(sub)
    axes = [i for i in e.free_symbols if scope.is_axis(i)]
    free, summed = [i for i in axes if i not in bound], [i for i in axes if i in bound]
    if len(free) != 1 or len(summed) != 1 or summed[0] not in owner.indices:
        return None
    return e, free[0], summed[0]


def _window_read(scope: Scope, sub: sp.Expr, at: int, w: sp.Indexed, bound: list):
    """``a*t + d*k + p`` with t free, k summed and W's, a > 0: one spatial axis; or None."""
    split = _free_and_summed(scope, sub, w, bound)
    if split is None:
        return None
    e, t, k = split
    a, d = e.coeff(t), e.coeff(k)
    p = sp.expand(e - a * t - d * k)
    if p.has(t, k) or a.has(t, k) or d.has(t, k) or _sign(scope, a) != 1:
        return None
    sign = _sign(scope, d)
    if sign is None:
        return None
    if sign > 0:
        return Spatial(t, at, k, _at(w, k), a, d, p)
    size = w.base.shape[_at(w, k)]  # d*k = d*(K - 1) + |d|*k' with k' = K - 1 - k
    return Spatial(t, at, k, _at(w, k), a, -d, sp.expand(p + d * (size - 1)), flip=True)


def _kernel_read(scope, sub, at, kernel, y, bound, form: str) -> Spatial | None:
    """One spatial axis of a kernel read at ``sub``, t free and l summed and Y's, s > 0:
    "transposed", ``t - s*l + p`` (or ``-t + s*l + p``: flipped), a conv_transpose's axis;
    "conv", ``l - s*t + p`` (or ``-l + s*t + p``: flipped), a correlation's, Y read at
    ``s*t + i - p``. None for any other subscript."""
    split = _free_and_summed(scope, sub, y, bound)
    if split is None:
        return None
    e, t, v = split
    ct, cv = e.coeff(t), e.coeff(v)
    p = sp.expand(e - ct * t - cv * v)
    unit, other = (ct, cv) if form == "transposed" else (cv, ct)
    if p.has(t, v) or other.has(t, v) or unit not in (1, -1) or _sign(scope, -ct * cv) != 1:
        return None
    stride, size = -unit * other, kernel.base.shape[at]
    if unit == 1:  # i = t - s*l + p: t = s*l + i - p (transposed); l = s*t + i - p (conv)
        return Spatial(t, _at(y, v), v, at, stride, sp.S.One, -p)
    # i = -t + s*l + p: t = s*l + i' + p - (I - 1) with i' = I - 1 - i (l and t swapped: conv)
    return Spatial(t, _at(y, v), v, at, stride, sp.S.One, sp.expand(p - size + 1), flip=True)


def _match_transposed(scope: Scope, factors: list, bound: list) -> list[Window]:
    """sum_{c,l,k} X[b, g, c, l] W[g, c, o, k] delta(t, s*l + d*k + p): a conv_transpose."""
    tensors = [f for f in factors if isinstance(f, sp.Indexed)]
    deltas = [f for f in factors if isinstance(f, sp.KroneckerDelta)]
    if len(tensors) != 2 or not deltas or len(tensors) + len(deltas) != len(factors):
        return []
    if not all(_distinct_axes(scope, t) for t in tensors):
        return []
    solved = [_solved(scope, d, bound) for d in deltas]
    if any(s is None for s in solved):
        return []
    plans = [_transposed(scope, x, w, solved, bound) for x, w in (tensors, tensors[::-1])]
    return [p for p in plans if p is not None]


def _solved(scope: Scope, delta: sp.KroneckerDelta, bound: list) -> tuple | None:
    """delta(t, rhs) with t free, coefficient +-1: (t, rhs expanded)."""
    diff = sp.expand(delta.args[0] - delta.args[1])
    free = [s for s in diff.free_symbols if scope.is_axis(s) and s not in bound]
    if len(free) != 1:
        return None
    (t,) = free
    c = diff.coeff(t)
    if c not in (1, -1):
        return None
    return t, sp.expand(-(diff - c * t) / c)


def _transposed(scope: Scope, x: sp.Indexed, w: sp.Indexed, solved: list, bound: list):
    spatial = []
    for t, rhs in solved:
        if t in x.indices or t in w.indices:
            return None
        ls = [i for i in x.indices if rhs.has(i)]
        ks = [i for i in w.indices if rhs.has(i)]
        if len(ls) != 1 or len(ks) != 1 or ls[0] in w.indices or ks[0] in x.indices:
            return None
        (v, k), axes = (ls[0], ks[0]), {s for s in rhs.free_symbols if scope.is_axis(s)}
        s, d = rhs.coeff(v), rhs.coeff(k)
        p = sp.expand(rhs - s * v - d * k)
        if axes != {v, k} or v not in bound or k not in bound or p.has(v, k):
            return None
        if _sign(scope, s) != 1 or _sign(scope, d) != 1:
            return None
        spatial.append(Spatial(t, _at(x, v), k, _at(w, k), s, d, p))
    spatial.sort(key=lambda s: s.at)  # the input's axis order: no transposes around
    ls, ks = {x.indices[s.at] for s in spatial}, {s.window for s in spatial}
    if len(ls) != len(spatial) or len(ks) != len(spatial):
        return None
    roles = _roles(
        [i for i in x.indices if i not in ls], [i for i in w.indices if i not in ks], bound
    )
    if roles is None or set(bound) != set(roles[2]) | ls | ks:
        return None
    return _window("transposed", x, w, roles, spatial)


def _match_indicator(scope: Scope, factors: list, bound: list) -> list[Window]:
    """sum_l Y[b, l] [0 <= t - s*l + p <= K - 1], per spatial axis: each t sums the Y[l]
    whose window (K long from s*l - p) covers it, i.e. Y convolved (transposed) with a
    kernel of K ones read at i = t - s*l + p, so t = s*l + i - p. Or, the summed index with
    coefficient 1, sum_l Y[b, l] [0 <= l - s*t + p <= K - 1]: the window of Y at t, i.e. Y
    correlated with K ones, read at l = s*t + i - p."""
    tensors = [f for f in factors if isinstance(f, sp.Indexed)]
    halves = [_half(f) for f in factors if not isinstance(f, sp.Indexed)]
    if len(tensors) != 1 or not halves or any(h is None for h in halves):
        return []
    (y,) = tensors
    pairs = _paired(scope, halves, y, bound) if _distinct_axes(scope, y) else None
    if not pairs or len({form for form, *_ in pairs}) != 1:
        return []
    spatial, kernel = [], sp.IndexedBase("ones", shape=tuple(p[-1] for p in pairs))
    for j, (form, t, v, e, _size) in enumerate(pairs):
        inner, outer = (t, v) if form == "transposed" else (v, t)
        stride = -e.coeff(outer)
        if _sign(scope, stride) != 1 or t in y.indices:
            return []
        offset = -sp.expand(e - inner + stride * outer)
        spatial.append(Spatial(t, _at(y, v), v, j, stride, sp.S.One, offset))
    windows = {s.window for s in spatial}
    if len(windows) != len(spatial) or len({s.out for s in spatial}) != len(spatial):
        return []
    if set(bound) != windows:
        return []
    groups = tuple(i for i in y.indices if i not in windows)
    ones = kernel[tuple(sp.Dummy() for _ in pairs)]
    return [_window(pairs[0][0], y, ones, ((), groups, (), ()), spatial, ones=True)]


def _match_window_sum(scope: Scope, factors: list, bound: list) -> list[Window]:
    """sum_k X[b, a*t + d*k + p]: X's windows summed, the correlation of X with a kernel of
    ones (its shape the summed indices' ranges)."""
    if len(factors) != 1 or not isinstance(factors[0], sp.Indexed) or plain(factors[0]):
        return []
    (x,) = factors
    if not all(k in scope.sizes for k in bound) or len(set(bound)) != len(bound):
        return []
    ones = sp.IndexedBase("ones", shape=tuple(scope.sizes[k] for k in bound))[tuple(bound)]
    spatial = [_window_read(scope, sub, at, ones, bound) for at, sub in enumerate(x.indices)]
    spatial = [s for s in spatial if s is not None]
    plain_x = [i for i in x.indices if scope.is_axis(i)]
    if len(plain_x) + len(spatial) != len(x.indices) or len(set(plain_x)) != len(plain_x):
        return []
    windows, outs = [s.window for s in spatial], [s.out for s in spatial]
    if len(set(windows)) != len(windows) or len(set(outs)) != len(outs):
        return []
    if set(windows) != set(bound) or (set(plain_x) & (set(outs) | set(bound))):
        return []
    return [_window("conv", x, ones, ((), tuple(plain_x), (), ()), spatial, ones=True)]


def _half(f: sp.Expr) -> sp.Expr | None:
    """``e`` of an indicator ``where(e >= 0, 1, 0)`` (any integer comparison, so written);
    None for any other factor."""
    if not (isinstance(f, where) and f.args[1] == 1 and f.args[2] == 0):
        return None
    c = f.args[0]
    if isinstance(c, (sp.GreaterThan, sp.StrictGreaterThan)):
        e = c.lhs - c.rhs
    elif isinstance(c, (sp.LessThan, sp.StrictLessThan)):
        e = c.rhs - c.lhs
    else:
        return None
    strict = isinstance(c, (sp.StrictGreaterThan, sp.StrictLessThan))
    return sp.expand(e - 1 if strict else e)


def _nonempty(scope: Scope, size: sp.Expr) -> bool:
    """``size >= 1``: a size (positive as declared; a derived one checked so by the module
    before any kernel runs) or shown so from its definition."""
    return bool(size.is_positive) or at_most(1, size, scope.derived, scope.scalars)


def _paired(scope: Scope, halves: list, y: sp.Indexed, bound: list) -> list | None:
    """The half-windows ``e >= 0`` in pairs ``e >= 0``, ``K - 1 - e >= 0`` over one free t
    and one summed l of Y, one of them with coefficient 1 in e (t: "transposed", else l:
    "conv"): ``(form, t, l, e, K)`` each; None if any is left over or the kernel might be
    empty."""
    keyed = {}
    for e in halves:
        axes = [i for i in e.free_symbols if scope.is_axis(i)]
        free = [i for i in axes if i not in bound]
        summed = [i for i in axes if i in bound]
        if len(free) != 1 or len(summed) != 1 or summed[0] not in y.indices:
            return None
        if e.has(sp.Indexed):
            return None
        keyed.setdefault((free[0], summed[0]), []).append(e)
    pairs = []
    for (t, v), es in keyed.items():
        form = "transposed" if es[0].coeff(t) in (1, -1) else "conv"
        inner = t if form == "transposed" else v
        if len(es) != 2 or es[0].coeff(inner) not in (1, -1):
            return None
        low, high = sorted(es, key=lambda e: -e.coeff(inner))
        size = sp.expand(low + high + 1)
        if low.coeff(inner) != 1 or size.has(t, v) or not _nonempty(scope, size):
            return None
        pairs.append((form, t, v, low, size))
    return pairs


# -- building: the torch kernel --------------------------------------------------------------
def window_value(cx: Context, plan: Window, bias: sp.Indexed | None = None) -> ir.Node:
    """The recognised convolution as IR: layouts, pads, one kernel, the result's axes; a
    conv's ``bias`` (a tensor over its groups and output channels) added by the kernel."""
    if plan.form == "weight":
        value = _weight_value(cx, plan)
    else:
        value = _conv_value(cx, plan, bias)
    axes = plan.axes
    if plan.form == "weight":
        first = [plan.groups + plan.outs, plan.batch]
        sizes = _sizes(plan.w, plan.groups + plan.outs) + _sizes(plan.x, plan.batch)
    else:
        first = [plan.batch, plan.groups + plan.outs]
        sizes = _sizes(plan.x, plan.batch + plan.groups) + _sizes(plan.w, plan.outs)
    if all(len(f) == 1 for f in first):
        return ir.relabel(value, axes)
    sizes += [cx.sizes[s.out] for s in plan.spatial]
    return ir.Reshape(value, tuple(cx.value(s, []) for s in sizes), axes=axes)


def _conv_value(cx: Context, plan: Window, bias: sp.Indexed | None) -> ir.Node:
    """conv(X, W) or conv_transpose(X, W), torch's padding where it is the read's."""
    x, w = plan.x, plan.w
    at_x = [_at(x, i) for i in plan.batch + plan.groups + plan.channels]
    x_sizes = [x.base.shape[s.at] for s in plan.spatial]
    k_sizes = [w.base.shape[s.kernel_at] for s in plan.spatial]
    groups = cx.value(sp.Mul(*_sizes(x, plan.groups)), [])
    summed = not plan.transposed and plan.channels and not (plan.batch or plan.groups or plan.outs)
    if plan.ones:
        xv, wv, groups = _ones(cx, plan, at_x, x_sizes, k_sizes)
    elif plan.batch and not (plan.groups or plan.channels or plan.outs):
        xv, wv, groups = _one_channel(cx, plan, at_x, x_sizes, k_sizes)
    elif summed:
        xv, wv, groups = _channels_apart(cx, plan, at_x, x_sizes, k_sizes)
    else:
        xv = _layout(cx, x, at_x + [s.at for s in plan.spatial], _groups(plan, "input") + x_sizes)
        kernel = (plan.channels, plan.outs) if plan.transposed else (plan.outs, plan.channels)
        at_w = [_at(w, i) for i in plan.groups + kernel[0] + kernel[1]]
        w_shape = _groups(plan, "kernel") + k_sizes
        wv = _layout(cx, w, at_w + [s.kernel_at for s in plan.spatial], w_shape)
    flips = tuple(2 + j for j, s in enumerate(plan.spatial) if s.flip)
    wv = ir.Flip(wv, flips) if flips else wv
    t_sizes = [cx.sizes[s.out] for s in plan.spatial]
    axes = list(zip(plan.spatial, x_sizes, k_sizes, t_sizes, strict=True))
    if plan.transposed:
        padding, output_padding, crops = zip(*(_transposed_axis(cx, *a) for a in axes))
        before, after = [(0, 0, size) for size in x_sizes], list(crops)
    else:
        padding, crops = zip(*(_correlated_axis(cx, *a) for a in axes))
        output_padding, before, after = (), list(crops), None
    value = ir.Conv(
        plan.transposed,
        _padded(cx, xv, before),
        wv,
        tuple(cx.value(s.stride, []) for s in plan.spatial),
        tuple(cx.value(s.dilation, []) for s in plan.spatial),
        groups,
        tuple(cx.value(q, []) for q in padding),
        tuple(cx.value(q, []) for q in output_padding),
        _bias(cx, bias),
    )
    value = ir.Reduce("sum", value, (0, 1), keepdim=True) if summed and not plan.ones else value
    if after is not None:  # conv_transpose's output, where torch's padding was not the read's
        return _padded(cx, value, after)
    for j, (s, size, k, t) in enumerate(axes):  # conv's output, where it is longer than T
        longer = sp.floor((size + 2 * padding[j] - s.dilation * (k - 1) - 1) / s.stride) + 1
        if not equal(longer, t, cx.derived, cx.scalars):
            value = ir.Narrow(value, 2 + j, ir.Number(0), cx.value(t, []))
    return value


def _ones(cx: Context, plan: Window, at_x: list, x_sizes: list, k_sizes: list) -> tuple:
    """(input, kernel, groups) of a convolution with ones: X's G = prod(groups) rows as G
    channels of one image, a depthwise kernel of ones (G, 1, K...). An empty X (G = 0) is no
    image at all, (0, 1, ...): torch refuses 0 groups, and conv then gives its empty result."""
    g = cx.value(sp.Mul(*_sizes(plan.x, plan.groups)), [])
    image = ir.Apply("min({0}, 1)", (g,)) if plan.groups else ir.Number(1)
    g = ir.Apply("max({0}, 1)", (g,)) if plan.groups else g
    xv = cx.tensor(plan.x.base.label.name)
    at = at_x + [s.at for s in plan.spatial]
    xv = ir.Permute(xv, tuple(at)) if at != sorted(at) else xv
    xv = ir.Reshape(xv, (image, g, *(cx.value(s, []) for s in x_sizes)))
    shape = (g, ir.Number(1), *(cx.value(s, []) for s in k_sizes))
    return xv, ir.Full(shape, ir.Number(1), cx.like), g


def _one_channel(cx: Context, plan: Window, at_x: list, x_sizes: list, k_sizes: list) -> tuple:
    """(input, kernel, groups) of one kernel of one channel run over a batch of B signals
    (a blur's, a kernel shared by every channel): the B rows as B channels of one image and
    the kernel repeated (B, 1, K...), a depthwise convolution. Torch's CPU kernels run that 3-5x
    faster than a batch of one-channel images forward, and conv_transpose 30-100x (a Gaussian
    blur's dx, (8, 16, 128, 128) at K 5: 403 ms against 19; docs/benchmarks.md). An empty
    batch is no image at all, as :func:`_ones` says."""
    xv, b = _rows_as_channels(cx, plan, at_x, x_sizes, plan.batch)
    at_w = [s.kernel_at for s in plan.spatial]
    kernel = [cx.value(s, []) for s in k_sizes]
    wv = _layout(cx, plan.w, at_w, [1, 1] + k_sizes)
    return xv, ir.Expand(wv, (b, ir.Number(1), *kernel)), b


def _rows_as_channels(cx: Context, plan: Window, at_x: list, x_sizes: list, rows: tuple) -> tuple:
    """(X, groups): X's ``rows`` (indices, laid out first by ``at_x``) as the channels of one
    image, for a depthwise kernel; no rows is no image, (0, 1, ...), as :func:`_ones` says."""
    count = cx.value(sp.Mul(*_sizes(plan.x, rows)), [])
    image, groups = ir.Apply("min({0}, 1)", (count,)), ir.Apply("max({0}, 1)", (count,))
    xv = cx.tensor(plan.x.base.label.name)
    at = at_x + [s.at for s in plan.spatial]
    xv = ir.Permute(xv, tuple(at)) if at != sorted(at) else xv
    return ir.Reshape(xv, (image, groups, *(cx.value(s, []) for s in x_sizes))), groups


def _channels_apart(cx: Context, plan: Window, at_x: list, x_sizes: list, k_sizes: list) -> tuple:
    """(input, kernel, groups) of C channels contracted into one output channel, a batch of
    one (a kernel's gradient, ``sum_{n,c,h} x[n, c, h + p] g[n, c, h]``, the signal as wide as
    the kernel): each channel correlated apart, a depthwise convolution of C groups, whose C
    results the caller sums. Torch's CPU kernel for one output channel unfolds the signal
    first, 20x slower at a blur's kernel gradient ((8, 16, 128, 128), K 5: 100 ms against 4.4,
    docs/benchmarks.md) and six times the memory. No channel (C = 0) is no image: the kernel
    is then a tap of zeros (torch refuses 0 groups)."""
    xv, g = _rows_as_channels(cx, plan, at_x, x_sizes, plan.channels)
    c = cx.value(sp.Mul(*_sizes(plan.x, plan.channels)), [])
    at_w = [_at(plan.w, i) for i in plan.channels] + [s.kernel_at for s in plan.spatial]
    wv = _layout(cx, plan.w, at_w, [sp.Mul(*_sizes(plan.w, plan.channels)), 1] + k_sizes)
    none = ir.Full(
        (ir.Number(1), ir.Number(1), *(cx.value(s, []) for s in k_sizes)), ir.Number(0), cx.like
    )
    return xv, ir.Apply("({1} if {0} else {2})", (c, wv, none)), g


def _correlated_axis(cx: Context, s: Spatial, size, k, t) -> tuple:
    """(torch's padding, X's explicit pad and crop) for one axis of X read at a*t + d*k + p:
    padding q = -p where the read runs from -q to at most size + q (conv then reads it as
    is), else 0 and X padded by -p and cropped to a*(T - 1) + d*(K - 1) + 1."""
    lo, span = -s.offset, s.stride * (t - 1) + s.dilation * (k - 1) + 1
    hi = span - size - lo
    if at_most(0, lo, cx.derived, cx.scalars) and at_most(hi, lo, cx.derived, cx.scalars):
        return sp.expand(lo), (0, 0, size)
    return sp.S.Zero, (lo, hi, span)


def _transposed_axis(cx: Context, s: Spatial, size, k, t) -> tuple:
    """(torch's padding, its output padding, the output's explicit pad and crop) for one axis
    of a conv_transpose: the full output, s*(L - 1) + d*(K - 1) + 1 long, starts at t = p;
    torch's padding q = -p crops q at both ends and output_padding adds T - (full - 2q) at
    the end, which torch takes below the stride (or the dilation) only."""
    full = s.stride * (size - 1) + s.dilation * (k - 1) + 1
    q = sp.expand(-s.offset)
    extra = sp.expand(t - full + 2 * q)
    below = any(at_most(extra, c - 1, cx.derived, cx.scalars) for c in (s.stride, s.dilation))
    if at_most(0, q, cx.derived, cx.scalars) and at_most(0, extra, cx.derived, cx.scalars):
        if below:
            extra = 0 if equal(extra, 0, cx.derived, cx.scalars) else extra
            return q, extra, (0, 0, t)
    return sp.S.Zero, sp.S.Zero, (s.offset, t - full - s.offset, t)


def _bias(cx: Context, bias: sp.Indexed | None) -> ir.Node | None:
    if bias is None:
        return None
    v = cx.tensor(bias.base.label.name)
    if len(bias.indices) == 1:
        return v
    return ir.Reshape(v, (ir.Number(-1),))


def _weight_value(cx: Context, plan: Window) -> ir.Node:
    """conv_weight(X, size, W): X stored [c, g, b, ...], W [c, g, o, ...], read in place."""
    x, w = plan.x, plan.w
    g = sp.Mul(*_sizes(x, plan.groups))
    c = sp.Mul(*_sizes(x, plan.channels))
    x_sizes = [x.base.shape[s.at] for s in plan.spatial]
    at_x = [_at(x, i) for i in plan.channels + plan.groups + plan.batch]
    xv = _layout(
        cx,
        x,
        at_x + [s.at for s in plan.spatial],
        [c, g * sp.Mul(*_sizes(x, plan.batch))] + x_sizes,
    )
    at_w = [_at(w, i) for i in plan.channels + plan.groups + plan.outs]
    k_sizes = [w.base.shape[s.kernel_at] for s in plan.spatial]
    wv = _layout(
        cx,
        w,
        at_w + [s.kernel_at for s in plan.spatial],
        [c, g * sp.Mul(*_sizes(w, plan.outs))] + k_sizes,
    )
    size = [g * sp.Mul(*_sizes(w, plan.outs)), sp.Mul(*_sizes(x, plan.batch))]
    size += [cx.sizes[s.out] for s in plan.spatial]
    return ir.ConvWeight(
        xv,
        tuple(cx.value(v, []) for v in size),
        wv,
        tuple(cx.value(s.dilation, []) for s in plan.spatial),
        tuple(cx.value(-s.offset, []) for s in plan.spatial),
        tuple(cx.value(s.stride, []) for s in plan.spatial),
        cx.value(g, []),
    )


def _at(t: sp.Indexed, i: sp.Symbol) -> int:
    return t.indices.index(i)


def _sizes(t: sp.Indexed, indices: tuple) -> list:
    return [t.base.shape[_at(t, i)] for i in indices]


def _groups(plan: Window, side: str) -> list:
    """The non-spatial axes of conv's input (batch, groups*channels) or kernel."""
    x, w, g = plan.x, plan.w, sp.Mul(*_sizes(plan.x, plan.groups))
    if side == "input":
        return [sp.Mul(*_sizes(x, plan.batch)), g * sp.Mul(*_sizes(x, plan.channels))]
    first, second = (plan.channels, plan.outs) if plan.transposed else (plan.outs, plan.channels)
    return [g * sp.Mul(*_sizes(w, first)), sp.Mul(*_sizes(w, second))]


def _layout(cx: Context, t: sp.Indexed, at: list[int], shape: list) -> ir.Node:
    """Tensor ``t`` with its axes in the order ``at``, reshaped to ``shape``."""
    v = cx.tensor(t.base.label.name)
    if at != sorted(at):
        v = ir.Permute(v, tuple(at))
    own = [t.base.shape[k] for k in at]
    if len(own) == len(shape) and all(sp.expand(a - b) == 0 for a, b in zip(own, shape)):
        return v
    return ir.Reshape(v, tuple(cx.value(s, []) for s in shape))


def _padded(cx: Context, v: ir.Node, dims: list[tuple]) -> ir.Node:
    """``v``'s spatial axes (from 2 on), padded and cropped (:func:`padded`)."""
    return padded(cx, v, {2 + j: d for j, d in enumerate(dims)}, 2 + len(dims))


def padded(cx: Context, v: ir.Node, dims: dict[int, tuple], rank: int) -> ir.Node:
    """``v`` (``rank`` axes) with each axis ``dims`` names shifted right by ``lo`` and ``hi``
    longer at the end, zeros coming in, ``length`` long: zeros padded where lo or hi > 0,
    then narrowed where either is < 0 (a crop never runs past the tensor this way, whatever
    the sizes)."""
    pads = []
    for k in range(rank - 1, min(dims, default=rank) - 1, -1):  # torch's pad: last axis first
        lo, hi, _ = dims.get(k, (0, 0, None))
        pads += [_at_least_0(cx, lo), _at_least_0(cx, hi)]
    if not all(ir.is_number(p, 0) for p in pads):
        v = ir.Pad(v, tuple(pads))
    for k, (lo, hi, length) in sorted(dims.items()):
        if not (at_most(0, lo, cx.derived, cx.scalars) and at_most(0, hi, cx.derived, cx.scalars)):
            v = ir.Narrow(v, k, _at_least_0(cx, -lo), cx.value(length, []))
    return v


# -- a window read: x[n, c, a*t + d*k + p] as a view --------------------------------------
def window_read(cx: Context, base: ir.Node, e: sp.Indexed) -> ir.Node | None:
    """``x[.., a*t + d*k + p, ..]`` with t and k indices of known range, a and d > 0, as a
    view of x: padded and cropped to the read's extent a*(T - 1) + d*(K - 1) + 1 from -p
    (zeros outside x: the language's padding), then ``unfold(dim, d*(K - 1) + 1, a)`` over
    that axis (t where it was, k a new last axis; every d-th entry); a shift ``x[.., t + p,
    ..]`` only padded and cropped to T entries from p. No index grid, no gather, no mask: a
    pool's Max or Sum then reduces the view. None for any other read."""
    scope = cx.scope([])
    reads, shifts, seen = [], [], []
    for pos, sub in enumerate(e.indices):
        if scope.is_axis(sub):
            seen.append(sub)
            continue
        found = _unfolded(scope, sub)
        shift = _shifted(scope, sub) if found is None else None
        if found is None and shift is None:
            return None
        if found is not None:
            reads.append((pos, *found))
            seen += [found[0], found[1]]
        else:
            shifts.append((pos, *shift))
            seen.append(shift[0])
    if not (reads or shifts) or len(set(seen)) != len(seen):
        return None
    dims, sizes = {}, {}
    for pos, t, p in shifts:  # x[t + p]: T entries from p, a crop and a pad
        t_size, size = cx.sizes[t], e.base.shape[pos]
        dims[pos] = (-p, t_size - size + p, t_size)
    for pos, t, k, a, d, p in reads:
        t_size, k_size, size = cx.sizes[t], cx.sizes[k], e.base.shape[pos]
        span = a * (t_size - 1) + d * (k_size - 1) + 1
        dims[pos] = (-p, span - size + p, span)
        sizes[pos] = (d * (k_size - 1) + 1, a, d)
    for pos, sub in enumerate(e.indices):
        if scope.is_axis(sub):
            cx.learn([(sub, e.base.shape[pos])], replace=False)
    v = padded(cx, base, dims, len(e.indices))
    for pos, (size, step, dilation) in sizes.items():
        v = ir.Unfold(v, pos, cx.value(size, []), cx.value(step, []), cx.value(dilation, []))
    axes = [sub for sub in e.indices]
    for pos, t, _ in shifts:
        axes[pos] = t
    for pos, t, k, *_ in reads:
        axes[pos] = t
        axes.append(k)
    return ir.relabel(v, tuple(axes))


def _shifted(scope: Scope, sub: sp.Expr) -> tuple | None:
    """(t, p) of a subscript t + p, t an index of known range and p free of indices: the read
    ``x[n, t + 1]`` is x cropped and padded along that axis (a view and one pad), where an
    index grid, a clamp and a mask gathered it (a total-variation loss 8x autograd's time,
    found probing)."""
    if sub.has(sp.Indexed) or not isinstance(sub, sp.Add):
        return None
    axes = [i for i in sub.free_symbols if scope.is_axis(i)]
    if len(axes) != 1 or axes[0] not in scope.sizes or sub.coeff(axes[0]) != 1:
        return None
    p = sp.expand(sub - axes[0])
    return None if p.has(axes[0]) else (axes[0], p)


def _unfolded(scope: Scope, sub: sp.Expr) -> tuple | None:
    """(t, k, a, d, p) of a subscript a*t + d*k + p over two indices of known range, a and
    d > 0; k the index with coefficient 1 (the window within), else the second by name."""
    if sub.has(sp.Indexed) or not isinstance(sub, (sp.Add, sp.Mul)):
        return None
    e = sp.expand(sub)
    axes = sorted((i for i in e.free_symbols if scope.is_axis(i)), key=str)
    if len(axes) != 2 or not all(i in scope.sizes for i in axes):
        return None
    if e.coeff(axes[0]) == 1 and e.coeff(axes[1]) != 1:
        axes.reverse()
    t, k = axes
    a, d = e.coeff(t), e.coeff(k)
    p = sp.expand(e - a * t - d * k)
    if p.has(t, k) or a.has(t, k) or d.has(t, k) or _sign(scope, a) != 1 or _sign(scope, d) != 1:
        return None
    return t, k, a, d, p


def _at_least_0(cx: Context, e: sp.Expr) -> ir.Node:
    """max(e, 0) as a python number: e itself or 0 where its sign is known (or shown: a read
    that ends inside x by its sizes' definitions, :mod:`derive.lower.bounds`)."""
    e = sp.expand(e)
    if e.is_nonnegative:
        return cx.value(e, [])
    if e.is_nonpositive or at_most(e, 0, cx.derived, cx.scalars):
        return ir.Number(0)
    if at_most(0, e, cx.derived, cx.scalars):
        return cx.value(e, [])
    return ir.Apply("max({0}, {1})", (cx.value(e, []), ir.Number(0)))


# One row a rule: (name, pure match on the flattened Sum's factors and summed indices, giving
# every candidate it finds, identity)
WINDOWS: list[tuple[str, Callable[[Scope, list, list], list[Window]], str]] = [
    (
        "correlation",
        _match_correlation,
        "sum_{c,k} X[b, c, a*t + d*k + p] W[o, c, k] "
        "-> conv(X, W, stride=a, dilation=d, padding=-p)",
    ),
    (
        "weight gradient",
        _match_weight,
        "sum_{b,k} X[b, c, a*t + d*k + p] W[b, o, k] "
        "-> conv_weight(X, (O, C, T), W, stride=d, dilation=a, padding=-p)",
    ),
    (
        "transposed read",
        _match_read_transposed,
        "sum_{c,l} Y[b, c, l] X[c, o, t - s*l + p] -> conv_transpose(Y, X, stride=s, padding=p)",
    ),
    (
        "correlated read",
        _match_read_correlated,
        "sum_{c,l} Y[b, c, l] X[o, c, l - s*t + p] -> conv(Y, X, stride=s, padding=-p)",
    ),
    (
        "transposed",
        _match_transposed,
        "sum_{c,l,k} X[b, c, l] W[c, o, k] delta(t, s*l + d*k + p) "
        "-> conv_transpose(X, W, stride=s, dilation=d, padding=-p)",
    ),
    (
        "window sum",
        _match_window_sum,
        "sum_k X[b, a*t + d*k + p] -> conv(X, ones(K), stride=a, dilation=d, padding=-p, groups=B)",
    ),
    (
        "window indicator",
        _match_indicator,
        "sum_l Y[b, l] [0 <= t - s*l + p <= K - 1] "
        "-> conv_transpose(Y, ones(K), stride=s, padding=p)",
    ),
]


# -- a Max over a window read: torch's max pool ---------------------------------------------
@dataclass(frozen=True)
class Pool:
    """``Max(x[b.., a_1*t_1 + k_1, .., a_n*t_n + k_n], k_1, .., k_n)`` over x's last n axes,
    every window inside x: ``max_pool<n>d(x, K, a)``, whose index of each maximum in x's plane,
    less the window's origin ``sum_m a_m t_m R_m`` (R_m the plane's stride of axis m), is the
    argmax's encoding ``sum_m k_m R_m`` (:mod:`derive.language.argmax`). The leading axes b..
    are flattened into torch's batch, with one channel: torch refuses an empty channel axis
    (C = 0), not an empty batch."""

    source: str
    kernel: tuple[sp.Expr, ...]
    stride: tuple[sp.Expr, ...]
    origin: sp.Expr  # the flat position of each window's first entry in x's plane
    plane: tuple[sp.Expr, ...]  # x's window axes, (H, W)


def plan_pool(cx: Context, body: sp.Expr, limits: tuple, axes: tuple) -> Pool | None:
    """The :class:`Pool` a Max over ``limits`` (two or three indices) of ``body`` (a definition
    over ``axes``) is, or None: one read of x, its leading subscripts the definition's leading
    axes, in order; no dilation, no padding, and each window shown inside x
    (:mod:`derive.lower.bounds`: torch pads with -inf, the language with 0)."""
    n = len(limits)
    if not (isinstance(body, sp.Indexed) and n in (2, 3) and len(body.indices) > n):
        return None
    lead, shape = len(body.indices) - n, body.base.shape
    if tuple(body.indices[:lead]) != tuple(axes[:lead]) or len(axes) != lead + n:
        return None
    scope = cx.scope([])
    kernel, stride, origin, plane = [], [], sp.S.Zero, sp.Mul(*shape[lead + 1 :])
    for m, ((var, lo, hi), sub) in enumerate(zip(limits, body.indices[lead:], strict=True)):
        found = _unfolded(scope, sub)
        if found is None or lo != 0:
            return None
        t, k, a, d, p = found
        if k != var or t != axes[lead + m] or d != 1 or p != 0:
            return None
        size = shape[lead + m]
        if not at_most(a * (cx.sizes[t] - 1) + hi, size - 1, cx.derived, cx.scalars):
            return None
        kernel.append(hi + 1)
        stride.append(a)
        origin += a * t * plane
        plane = plane / shape[lead + m + 1] if m + 1 < n else 1
    plane = tuple(shape[lead:])
    return Pool(body.base.label.name, tuple(kernel), tuple(stride), sp.expand(origin), plane)


def pool_value(cx: Context, pool: Pool) -> ir.MaxPool:
    """The max pool's call on x as a batch of one-channel planes, ``(-1, 1, H, W)``."""
    shape = (ir.Number(-1), ir.Number(1), *(cx.value(d, []) for d in pool.plane))
    return ir.MaxPool(
        ir.Reshape(cx.tensor(pool.source), shape),
        tuple(cx.value(k, []) for k in pool.kernel),
        tuple(cx.value(s, []) for s in pool.stride),
    )
