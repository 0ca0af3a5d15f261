"""Lowering of window contractions (issue 25): a Sum of two tensor reads whose indices meet
through affine subscripts, or through deltas, is a convolution, printed as one torch kernel.

The rules, one row each of :data:`WINDOWS`, tried in order by :func:`plan_window` before the
generic contraction (a Sum no rule matches keeps the generic lowering: index grids, clamped
into the axis and masked to 0 outside):

- correlation: ``sum_{c,k} X[b, g, c, a*t + d*k + p] W[g, o, c, k]``
  -> ``conv(pad(X), W, stride=a, dilation=|d|, groups=G)``, W flipped along k where d < 0
- kernel read backwards: ``sum_{c,l} Y[b, c, l] X[c, o, -t + s*l + p]``
  -> ``pad(conv_transpose(Y, X flipped, stride=s))``
- transposed: ``sum_{c,l,k} X[b, g, c, l] W[g, c, o, k] delta(t, s*l + d*k + p)``
  -> ``pad(conv_transpose(X, W, stride=s, dilation=d, groups=G))``

Each index has one role, read off the tensors it subscripts: b (X and the result: the batch),
g (X, W and the result: a group), c (X and W, summed: the channels contracted), o (W and the
result: the output channels), and per spatial axis the result's t and the window k (and X's l,
transposed). Several indices may share a role (flattened into one axis, reshaped back after).
Nothing here knows an op: the forward's convolution, x's adjoint (transposed, or a correlation
with the kernel flipped where the inversion solved the read) and w's adjoint (x correlated with
grad_out) are derived by the engine; these rules only recognise the shape of a contraction.
A param coefficient (a stride, a dilation) counts as positive: torch refuses one that is not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp

from derive.ir import nodes as ir
from derive.lower.context import Context
from derive.lower.value import Scope, plain


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
    """A Sum recognised as a convolution of ``x`` (the input) with ``w`` (the kernel)."""

    transposed: bool
    x: sp.Indexed
    w: sp.Indexed
    batch: tuple[sp.Symbol, ...]
    groups: tuple[sp.Symbol, ...]
    channels: tuple[sp.Symbol, ...]
    outs: tuple[sp.Symbol, ...]
    spatial: tuple[Spatial, ...]


# -- matching: pure, on the Sum and the scope -------------------------------------------------
def plan_window(scope: Scope, e: sp.Sum) -> Window | None:
    """The convolution ``e`` is, by the first row of :data:`WINDOWS` that matches; or None."""
    flat = _flattened(e)
    if flat is None:
        return None
    factors, limits = flat
    for _name, match, _identity in WINDOWS:
        plan = match(scope, factors, [lim[0] for lim in limits])
        if plan is not None and _whole(plan, limits) and _free(plan) == _free_of(scope, e):
            return plan
    return None


def _flattened(e: sp.Sum) -> tuple[list, list] | None:
    """sum_i f sum_j g -> the factors f, g and the limits of i and j: one product."""
    coef, rest = e.function.as_coeff_Mul()
    if coef != 1:
        return None
    factors, limits = [], list(e.limits)
    for f in sp.Mul.make_args(rest):
        if not isinstance(f, sp.Sum):
            factors.append(f)
            continue
        inner = _flattened(f)
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


def _match_correlation(scope: Scope, factors: list, bound: list) -> Window | None:
    """sum_{c,k} X[b, g, c, a*t + d*k + p] W[g, o, c, k]: X read through affine subscripts."""
    if len(factors) != 2 or not all(isinstance(f, sp.Indexed) for f in factors):
        return None
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
            return Window(False, x, w, *roles, tuple(spatial))
    return None


def _match_read_transposed(scope: Scope, factors: list, bound: list) -> Window | None:
    """sum_{c,l} Y[b, c, l] X[c, o, -t + s*l + p], s > 0 (an adjoint's read of a kernel
    backwards): t = s*l + i' + p - (I - 1) with i' = I - 1 - i, so a conv_transpose of Y with
    X flipped as its kernel."""
    if len(factors) != 2 or not all(isinstance(f, sp.Indexed) for f in factors):
        return None
    for kernel, y in (factors, factors[::-1]):
        if plain(kernel) or not _distinct_axes(scope, y):
            continue
        spatial = [
            _backwards_read(scope, sub, at, kernel, y, bound)
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
            return Window(True, y, kernel, *roles, tuple(spatial))
    return None


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


def _backwards_read(scope, sub, at, kernel, y, bound) -> Spatial | None:
    """``-t + s*l + p`` with t free, l summed and Y's, s > 0: one spatial axis of a
    conv_transpose with the kernel flipped there; or None."""
    split = _free_and_summed(scope, sub, y, bound)
    if split is None:
        return None
    e, t, v = split
    stride, p = e.coeff(v), sp.expand(e + t - e.coeff(v) * v)
    if e.coeff(t) != -1 or p.has(t, v) or stride.has(t, v) or _sign(scope, stride) != 1:
        return None
    size = kernel.base.shape[at]  # t = s*l + p - i = s*l + i' + p - (I - 1), i' = I - 1 - i
    return Spatial(t, _at(y, v), v, at, stride, sp.S.One, sp.expand(p - size + 1), flip=True)


def _match_transposed(scope: Scope, factors: list, bound: list) -> Window | None:
    """sum_{c,l,k} X[b, g, c, l] W[g, c, o, k] delta(t, s*l + d*k + p): a conv_transpose."""
    tensors = [f for f in factors if isinstance(f, sp.Indexed)]
    deltas = [f for f in factors if isinstance(f, sp.KroneckerDelta)]
    if len(tensors) != 2 or not deltas or len(tensors) + len(deltas) != len(factors):
        return None
    if not all(_distinct_axes(scope, t) for t in tensors):
        return None
    solved = [_solved(scope, d, bound) for d in deltas]
    if any(s is None for s in solved):
        return None
    plans = [_transposed(scope, x, w, solved, bound) for x, w in (tensors, tensors[::-1])]
    plans = [p for p in plans if p is not None]
    order = list(scope.order)

    def rank(p: Window) -> int:
        return min((order.index(b) for b in p.batch if b in order), default=len(order))

    return min(plans, key=rank, default=None)  # the input holds the result's first axis


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
    return Window(True, x, w, *roles, tuple(spatial))


# -- building: the torch kernel --------------------------------------------------------------
def window_value(cx: Context, plan: Window) -> ir.Node:
    """The recognised convolution as IR: layouts, pads, one conv kernel, the result's axes."""
    x, w, n = plan.x, plan.w, len(plan.spatial)
    at_x = [_at(x, i) for i in plan.batch + plan.groups + plan.channels]
    x_sizes = [x.base.shape[s.at] for s in plan.spatial]
    xv = _layout(cx, x, at_x + [s.at for s in plan.spatial], _groups(plan, "input") + x_sizes)
    kernel = (plan.channels, plan.outs) if plan.transposed else (plan.outs, plan.channels)
    at_w = [_at(w, i) for i in plan.groups + kernel[0] + kernel[1]]
    k_sizes = [w.base.shape[s.kernel_at] for s in plan.spatial]
    wv = _layout(
        cx, w, at_w + [s.kernel_at for s in plan.spatial], _groups(plan, "kernel") + k_sizes
    )
    flips = tuple(2 + j for j, s in enumerate(plan.spatial) if s.flip)
    wv = ir.Flip(wv, flips) if flips else wv
    t_sizes = [cx.sizes[s.out] for s in plan.spatial]
    if not plan.transposed:  # X read at a*t + d*k + p: X padded by -p, to a*(T-1) + d*(K-1) + 1
        spans = [
            (-s.offset, s.stride * (t - 1) + s.dilation * (k - 1) + 1)
            for s, t, k in zip(plan.spatial, t_sizes, k_sizes, strict=True)
        ]
        xv = _padded(
            cx,
            xv,
            [(lo, span - size - lo, span) for (lo, span), size in zip(spans, x_sizes, strict=True)],
        )
    value = ir.Conv(
        plan.transposed,
        xv,
        wv,
        tuple(cx.value(s.stride, []) for s in plan.spatial),
        tuple(cx.value(s.dilation, []) for s in plan.spatial),
        cx.value(sp.Mul(*_sizes(x, plan.groups)), []),
    )
    if plan.transposed:  # the full output, s*(L-1) + d*(K-1) + 1 long, starts at t = p
        full = [
            s.stride * (size - 1) + s.dilation * (k - 1) + 1
            for s, size, k in zip(plan.spatial, x_sizes, k_sizes, strict=True)
        ]
        value = _padded(
            cx,
            value,
            [
                (s.offset, t - f - s.offset, t)
                for s, t, f in zip(plan.spatial, t_sizes, full, strict=True)
            ],
        )
    axes = plan.batch + plan.groups + plan.outs + tuple(s.out for s in plan.spatial)
    if len(plan.batch) == 1 and not plan.groups and len(plan.outs) == 1:
        return ir.relabel(value, axes)
    sizes = _sizes(x, plan.batch + plan.groups) + _sizes(w, plan.outs) + t_sizes
    assert len(sizes) == len(axes) and n == len(plan.spatial)
    return ir.Reshape(value, tuple(cx.value(s, []) for s in sizes), axes=axes)


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
    """``v``'s spatial axes (from 2 on) shifted right by ``lo`` and ``hi`` longer at the end,
    zeros coming in, ``length`` long: zeros padded where lo or hi > 0, then narrowed where
    either is < 0 (a crop never runs past the tensor this way, whatever the sizes)."""
    pads = []
    for lo, hi, _ in reversed(dims):  # torch's pad lists the last axis first
        pads += [_at_least_0(cx, lo), _at_least_0(cx, hi)]
    if not all(ir.is_number(p, 0) for p in pads):
        v = ir.Pad(v, tuple(pads))
    for j, (lo, hi, length) in enumerate(dims):
        if not (sp.expand(lo).is_nonnegative and sp.expand(hi).is_nonnegative):
            v = ir.Narrow(v, 2 + j, _at_least_0(cx, -lo), cx.value(length, []))
    return v


def _at_least_0(cx: Context, e: sp.Expr) -> ir.Node:
    """max(e, 0) as a python number: e itself or 0 where its sign is known."""
    e = sp.expand(e)
    if e.is_nonnegative:
        return cx.value(e, [])
    if e.is_nonpositive:
        return ir.Number(0)
    return ir.Apply("max({0}, {1})", (cx.value(e, []), ir.Number(0)))


# One row a rule: (name, pure match on the flattened Sum's factors and summed indices, identity)
WINDOWS: list[tuple[str, Callable[[Scope, list, list], Window | None], str]] = [
    (
        "correlation",
        _match_correlation,
        "sum_{c,k} X[b, c, a*t + d*k + p] W[o, c, k] -> conv(pad(X), W, stride=a, dilation=d)",
    ),
    (
        "kernel read backwards",
        _match_read_transposed,
        "sum_{c,l} Y[b, c, l] X[c, o, -t + s*l + p] "
        "-> pad(conv_transpose(Y, X flipped, stride=s))",
    ),
    (
        "transposed",
        _match_transposed,
        "sum_{c,l,k} X[b, c, l] W[c, o, k] delta(t, s*l + d*k + p) "
        "-> pad(conv_transpose(X, W, stride=s, dilation=d))",
    ),
]
