"""Fusions: where two torch kernels can be one, the lowering emits one.

In: an expression node (a Sum of terms, a product) or an in-place update the lowering is about
to emit; out: one fused torch call instead of two or three kernels. Each rule is one row of
:data:`FUSIONS`, ``Fusion(name, node, match, build, identity)``, tried in order by one loop
(:func:`fuse`), as tinygrad's pattern matcher tries its rules:

- ``match(node, scope)`` is pure: it reads the node and a :class:`~derive.lower.value.Scope`
  (which names are python numbers, which sums are computed already) and returns what it found,
  or ``None``. It lowers nothing, emits nothing, fills no memo: deciding costs no statement.
- ``build(context, found, order)`` lowers what ``match`` found and returns the fused IR node
  (a statement for an update). It runs only after a match, so it never undoes anything.

A new fusion is a new row and a line in ``tests/unit/test_lowering.py``'s table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy as sp

from derive.ir import nodes as ir
from derive.ir.printer import ADDCMUL, Precedence, precedence
from derive.lower.context import Context
from derive.lower.reductions import Contraction, contract, plan_contraction, reduce
from derive.lower.value import (
    PickUpdate,
    Scope,
    align,
    chain,
    filled,
    is_gate,
    natural_order,
    plain,
    union,
)
from derive.lower.windows import Window, plan_window, window_value
from derive.symbolic.indices import without


@dataclass(frozen=True)
class Fusion:
    name: str
    node: type  # the kind of site it applies to: sp.Add, sp.Mul or PickUpdate
    match: Callable[[Any, Scope], Any]  # pure: what build needs, or None
    build: Callable[[Context, Any, list], ir.Node | ir.Statement]  # the fused node (or update)
    identity: str  # the rewrite, in math, with what it saves


# -- b[m] + sum_k x[n, k] W[k, m] -> torch.addmm(b, x, W) ----------------------------------------
@dataclass(frozen=True)
class _Addmm:
    total: sp.Sum
    rest: sp.Expr
    plan: Contraction


def _match_addmm(e: sp.Add, scope: Scope) -> _Addmm | None:
    sums = [t for t in e.args if isinstance(t, sp.Sum) and t not in scope.computed]
    if len(sums) != 1:
        return None
    (total,) = sums
    if any(
        isinstance(f, sp.KroneckerDelta) and f.has(sp.Indexed)
        for f in sp.Mul.make_args(total.function)
    ):
        # a delta against data: a scatter (one index_add_, lowerer._sum), which a matmul
        # would make a dense one-hot matrix (V, E) (found probing a two-layer GNN)
        return None
    bound, rest = [lim[0] for lim in total.limits], e - total
    plan = plan_contraction(scope, total.function, bound, list(scope.order))
    if plan is None or not plan.matmul or scope.scalar(rest):
        return None
    if not scope.axes(rest) <= set(plan.out):
        return None
    return _Addmm(total, rest, plan)


def _build_addmm(cx: Context, found: _Addmm, order: list) -> ir.Node:
    cx.learn_limits(found.total.limits)
    mm = contract(cx, found.plan, order)
    rest = cx.value(found.rest, order)
    return ir.Addmm(align(rest, mm.axes), mm.left, mm.right, axes=mm.axes)


# -- b[o] + sum_{c,k} x[n, c, t + k] w[o, c, k] -> torch.conv1d(x, w, b) ---------------------
@dataclass(frozen=True)
class _ConvBias:
    total: sp.Sum
    bias: sp.Indexed
    plan: Window


def _match_conv_bias(e: sp.Add, scope: Scope) -> _ConvBias | None:
    sums = [t for t in e.args if isinstance(t, sp.Sum) and t not in scope.computed]
    if len(sums) != 1 or len(e.args) != 2:
        return None
    (total,) = sums
    bias = e - total
    if not plain(bias) or not all(scope.is_axis(i) for i in bias.indices):
        return None
    plan = plan_window(scope, total)
    if plan is None or plan.form == "weight" or tuple(bias.indices) != plan.groups + plan.outs:
        return None  # the bias over exactly the kernel's output channels, in their order
    return _ConvBias(total, bias, plan)


def _build_conv_bias(cx: Context, found: _ConvBias, order: list) -> ir.Node:
    cx.learn_limits(found.total.limits)
    return cx.permuted(window_value(cx, found.plan, bias=found.bias), order)


# -- r + c * a * b -> torch.addcmul(r, a, b, value=c) ------------------------------------------
@dataclass(frozen=True)
class _Addcmul:
    rest: sp.Expr  # r: every other term
    coef: sp.Expr  # c: a python number (a size or a param in it: 1/C)
    small: sp.Expr  # a: the other tensor factors
    big: sp.Expr  # b: the factor over the most axes (the pass addcmul saves)


def _match_addcmul(e: sp.Add, scope: Scope) -> _Addcmul | None:
    """The term whose biggest tensor factor is biggest; every python-number factor of it
    (``1/C``, ``sqrt(2)/sqrt(pi)``) goes into ``value``: ``r - (s / C)[:, None] * x`` is
    ``addcmul(r, s[:, None], x, value=-1 / C)``, one kernel where ``s / C`` was one more
    (a float32 tensor times a python number also converts the number to a tensor first)."""
    best = None
    for term in e.args:
        coef, rest = term.as_coeff_Mul()
        factors = [f for f in sp.Mul.make_args(rest) if not scope.scalar(f)]
        if len(factors) < 2 or any(is_gate(f) for f in factors):
            continue  # a gate selects (arithmetic's _gated): 0 * exp(1e4) is nan, not 0
        coef *= sp.Mul(*[f for f in sp.Mul.make_args(rest) if scope.scalar(f)])
        sizes = [len(scope.axes(f)) for f in factors]
        big = max(range(len(factors)), key=lambda k: sizes[k])
        if factors[big].is_Pow and factors[big].exp.is_negative:
            continue  # addcmul multiplies two tensors
        key = (sizes[big], coef != 1)  # the biggest pass; absorb a coefficient
        if best is None or key > best[0]:
            small = sp.Mul(*factors[:big], *factors[big + 1 :])
            best = (key, _Addcmul(e - term, coef, small, factors[big]))
    if best is None or scope.scalar(best[1].rest):
        return None
    return best[1]


def _build_addcmul(cx: Context, found: _Addcmul, order: list) -> ir.Node:
    big = cx.value(found.big, order)
    r, a = cx.value(found.rest, order), cx.value(found.small, order)
    axes = union([r.axes, a.axes, big.axes], order)
    coef = ir.Number(found.coef) if found.coef.is_Number else cx.value(found.coef, [])
    if r.scalar or a.scalar or big.scalar:
        # addcmul takes three tensors: where the other terms lowered to a number (a zero
        # adjoint), or a factor did (a product of masks 0 in every case, fuzz 700637), the
        # product is written out and the rest added
        factors = [align(a, axes), align(big, axes)]
        if found.coef != 1:
            factors.insert(0, coef)
        product = chain("*", factors[0], factors[1:], axes=axes)
        if ir.is_number(r, 0):
            return product
        # the other terms summed first, then added: (a + b) kept as a group, aligned to the
        # product's axes as the three-tensor form aligns it (W[t] * S beside N * u[o, m])
        r = ir.Paren(r, axes=r.axes) if precedence(r) <= Precedence.ADD else r
        return ir.Binary("+", product, align(r, axes), axes=axes)
    form = "torch.addcmul({0}, {1}, {2})"
    args = tuple(align(v, axes) for v in (r, a, big))
    if found.coef != 1:
        form, args = ADDCMUL + "({0}, {1}, {2}, {3})", args + (coef,)
    return ir.Apply(form, args, axes=axes)


# -- (c + a) * g -> torch.addcmul(c * g, a, g) -------------------------------------------------
def _match_distribute(e: sp.Mul, scope: Scope) -> _Addcmul | None:
    adds = [f for f in e.args if isinstance(f, sp.Add)]
    if len(adds) != 1 or len(adds[0].args) != 2 or not adds[0].args[0].is_Number:
        return None
    other = e / adds[0]
    if scope.scalar(other) or scope.scalar(adds[0]):
        return None
    if sum(not scope.scalar(f) for f in sp.Mul.make_args(other)) > 1:
        # g = a b of two tensors: distributed, c a b - h a b computes a b first, which may
        # overflow where (c - h) is 0 (tanh's 1 - h**2 at saturation, fuzz --range 120334);
        # undistributed, (c - h) multiplies in first, as autograd's chain does
        return None
    c, a = adds[0].args
    # a * g kept unevaluated: (c*x**2 + 1) * x is x + c * x**2 * x, addcmul(x, x**2, x,
    # value=c), two passes where x**3 (SymPy's own product) has no two factors to fuse
    spread = sp.Mul(*sp.Mul.make_args(a), *sp.Mul.make_args(other), evaluate=False)
    return _match_addcmul(sp.Add(c * other, spread, evaluate=False), scope)


# -- Sum(x[n, m], n) / N -> x.mean(0) -------------------------------------------------------
@dataclass(frozen=True)
class _Mean:
    total: sp.Sum
    bound: list
    inner: list


def _match_mean(e: sp.Mul, scope: Scope) -> _Mean | None:
    sums = [f for f in e.args if isinstance(f, sp.Sum)]
    if len(sums) != 1 or sums[0] in scope.computed:
        return None  # a sum computed already is reused, not recomputed as a mean
    (total,) = sums
    extent = sp.Mul(*[hi - lo + 1 for _, lo, hi in total.limits])
    rest = sp.Mul(*without(e.args, total))
    if sp.expand(rest * extent) != 1:  # the factor beside the sum is 1/extent
        return None
    bound = [lim[0] for lim in total.limits]
    inner = natural_order(total.function, list(scope.order))
    if plan_contraction(scope, total.function, bound, inner) is not None:
        return None  # a matmul or einsum, then the division
    if not set(bound) <= scope.axes(total.function):
        return None
    return _Mean(total, bound, inner)


def _build_mean(cx: Context, found: _Mean, order: list) -> ir.Node:
    cx.learn_limits(found.total.limits)
    body = cx.value(found.total.function, found.inner)
    return cx.permuted(reduce("mean", body, found.bound), order)


# -- x[n, t[n]] += v[n] -> x.scatter_add_(1, t[:, None], v[:, None]) ----------------------------
def _match_scatter_add(site: PickUpdate, scope: Scope) -> PickUpdate | None:
    others = {a for a in site.axes if a != site.axis}
    if scope.axes(site.data) != others or scope.scalar(site.coef):
        return None
    if scope.axes(site.coef) not in (others, set()):
        return None
    return site


def _build_scatter_add(cx: Context, site: PickUpdate, order: list) -> ir.Statement:
    others = [a for a in site.axes if a != site.axis]
    pick, value = cx.value(site.data, others), cx.value(site.coef, others)
    if value.scalar:  # a coefficient that lowers to a python number: scatter_add_ takes tensors
        value = filled(value, (), cx.like, ())
    pos = site.axes.index(site.axis)
    if value.axes:
        src = ir.Unsqueeze(value, pos)
    else:  # one number for every row: a broadcast view, nothing copied
        shape = [cx.size(a) for a in others]
        src = ir.Expand(value, tuple(shape[:pos] + [ir.Number(1)] + shape[pos:]))
    return ir.ScatterAdd(site.name, pos, ir.Unsqueeze(pick, pos), src)


FUSIONS: list[Fusion] = [
    Fusion(
        "addmm",
        sp.Add,
        _match_addmm,
        _build_addmm,
        "b[m] + sum_k x[n, k] W[k, m] -> torch.addmm(b, x, W): the bias rides in the matmul",
    ),
    Fusion(
        "conv_bias",
        sp.Add,
        _match_conv_bias,
        _build_conv_bias,
        "b[o] + sum_{c,k} x[n, c, t + k] w[o, c, k] -> torch.conv1d(x, w, b): the bias rides "
        "in the convolution",
    ),
    Fusion(
        "addcmul",
        sp.Add,
        _match_addcmul,
        _build_addcmul,
        "r + c * a * b -> torch.addcmul(r, a, b, value=c): one pass over the tensor, not two",
    ),
    Fusion(
        "mean",
        sp.Mul,
        _match_mean,
        _build_mean,
        "Sum(x[n, m], n) / N -> x.mean(0): one kernel, not two",
    ),
    Fusion(
        "distribute",
        sp.Mul,
        _match_distribute,
        _build_addcmul,
        "(c + a) * g -> c * g + a * g -> torch.addcmul(c * g, a, g): one pass, not two",
    ),
    Fusion(
        "scatter_add",
        PickUpdate,
        _match_scatter_add,
        _build_scatter_add,
        "x[n, t[n]] += v[n] -> x.scatter_add_(1, t[:, None], v[:, None]): one kernel, not three",
    ),
]


def fuse(cx: Context, site: Any, order: list) -> ir.Node | ir.Statement | None:
    """The first fusion whose pattern matches ``site``, built; None when none applies."""
    scope = cx.scope(order)
    for rule in FUSIONS:
        if isinstance(site, rule.node):
            found = rule.match(site, scope)
            if found is not None:
                return rule.build(cx, found, order)
    return None
