"""Symbolic reverse mode over an op graph, in index form.

For a definition ``u[I] = f(..., v[..], ...)`` the adjoint of ``v`` receives

    dv[J] += sum_I du[I] * d f(I) / d v[J]

and ``d v[K] / d v[J]`` is the product of ``KroneckerDelta(K_p, J_p)``; ``d max_c f / d v`` is
``sum_c delta(c, argmax) df/dv`` (over several indices, one delta per index against its
digit of the one argmax: :mod:`derive.language.argmax`). These deltas are left for the
simplifier to eliminate.
The result is one expression per tensor, written in terms of the adjoints of its consumers
(the seed's step-by-step form); :func:`inline` substitutes them down to ``grad_out``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import sympy as sp

from derive.errors import DerivationError
from derive.functions import where, zero_in_floats
from derive.language import Definition, Graph, ReduceMax, Tensor, View, tensor_reads
from derive.language.argmax import picks
from derive.names import gradient_name
from derive.symbolic.indices import (
    Fresh,
    canonical_bound,
    freshen_bound,
    indexed_atoms,
    nice_indices,
    substitute,
    symbol_atoms,
    top_indexed,
    top_reductions,
)
from derive.symbolic.inversion import keep_padding

GRAD_OUT = "grad_out"


@dataclass
class Adjoints:
    """The step-by-step adjoints of one graph."""

    graph: Graph
    names: dict[str, str]  # tensor -> name of its adjoint ("dprobs"; the output's is grad_out)
    free: dict[str, tuple[sp.Symbol, ...]]  # tensor -> the free indices of its adjoint
    exprs: dict[str, sp.Expr]  # tensor -> adjoint expression, consumers' adjoints as symbols
    views: dict[str, tuple[str, str]] = field(default_factory=dict)  # viewed-adjoint -> (d, src)
    argmax: dict[str, Tensor] = field(default_factory=dict)  # Max definition -> argmax tensor
    fresh: Fresh = field(default_factory=Fresh)  # one source of bound names: no capture
    taken: frozenset[str] = frozenset()  # names an index must not read as (tensors, sizes)
    squares: frozenset[str] = frozenset()  # tensors defined as sums of squares (square_tensors)
    # each maximum the output is proven not to see (derive.symbolic.shifts) -> the chain
    # rule's adjoint for it, which ``exprs`` holds as 0 (explain shows both)
    unseen: dict[str, sp.Expr] = field(default_factory=dict)

    def readable(self, expr: sp.Expr, tensor: str) -> sp.Expr:
        """``expr``, an adjoint of ``tensor``, with its bound indices named readably."""
        return canonical_bound(expr, self.free[tensor], self.taken)

    def symbol(self, name: str, indices: tuple = ()) -> sp.Expr:
        """The adjoint of tensor ``name`` at ``indices`` as a SymPy object."""
        dims = self.graph.tensors[name].dims
        if not dims:
            return sp.Symbol(self.names[name], real=True)
        return sp.IndexedBase(self.names[name], shape=dims, real=True)[indices]


def _deltas(indices: tuple, targets: tuple) -> sp.Expr:
    return sp.Mul(*[sp.KroneckerDelta(a, b) for a, b in zip(indices, targets, strict=True)])


class _Differentiator:
    """d expr / d target[J], with Sums and Maxes handled structurally."""

    def __init__(
        self, op: str, text: str, argmax: sp.Expr | None, squares: frozenset[str] = frozenset()
    ) -> None:
        self.op, self.text, self.argmax, self.squares = op, text, argmax, squares

    def __call__(self, expr: sp.Expr, target: str, J: tuple) -> sp.Expr:
        if isinstance(expr, sp.Sum):
            return sp.Sum(self(expr.function, target, J), *expr.limits)
        if isinstance(expr, ReduceMax):  # sum_{p,q} delta(p, floor(a/M)) delta(q, Mod(a, M)) df
            at = picks(expr, self.argmax)
            pick = _deltas(tuple(lim[0] for lim in expr.limits), at)
            return sp.Sum(pick * self(expr.function, target, J), *expr.limits)
        occurrences: list[sp.Expr] = [i for i in top_indexed(expr) if i.base.label.name == target]
        if not J:  # a 0-d tensor is read whole, as its symbol, at any depth (one slot for all)
            occurrences += [s for s in symbol_atoms(expr) if s.name == target and not s.is_integer]
        nested = [r for r in top_reductions(expr) if _mentions(r, target)]
        if not occurrences and not nested:
            return sp.S.Zero
        slots = {o: sp.Symbol(f"_slot{k}", real=True) for k, o in enumerate(occurrences + nested)}
        flat = expr.xreplace(slots)
        total = sp.S.Zero
        squares = sums_of_squares(slots, flat, self.squares)
        for original, slot in slots.items():
            local = partial(flat, slot, self.op, self.text, squares)
            local = local.xreplace({s: o for o, s in slots.items()})
            if isinstance(original, sp.Indexed):
                inner = _deltas(original.indices, J)
            elif isinstance(original, sp.Symbol):  # d t / d t: a 0-d tensor has no deltas
                inner = sp.S.One
            else:
                inner = self(original, target, J)
            total += local * inner
        return total


def partial(
    flat: sp.Expr, slot: sp.Symbol, op: str, text: str, squares: frozenset = frozenset()
) -> sp.Expr:
    """d flat / d slot, where ``slot`` stands for one read; reverse and forward mode share it.

    d step(x)/dx = DiracDelta(x) -> 0: zero wherever it is defined, as autograd's; so is
    d sign(u)/du, which SymPy leaves unevaluated for u not known real (the double backward of
    abs differentiates its adjoint's sign). A derivative SymPy cannot take is refused.
    ``squares``: the slots that stand for a sum of squares (:func:`sums_of_squares`), whose
    roots are held as :class:`_root`.
    """
    held = _roots_held(_powers_held(flat, slot), squares)
    local = sp.diff(held, slot).replace(_power, sp.Pow).replace(_root, sp.Pow)
    local = local.replace(sp.DiracDelta, lambda *_: sp.S.Zero)
    local = local.replace(_step_derivative, lambda *_: sp.S.Zero)
    if local.has(sp.Derivative, sp.Subs):
        stuck = sorted({str(d.expr.func) for d in local.atoms(sp.Derivative)} or {"it"})
        problem = f"SymPy cannot differentiate {', '.join(stuck)} (no derivative known)"
        raise DerivationError(op, problem, text)
    return local


class _power(sp.Function):  # noqa: N801
    """b**e with an exponent that is not a number, held while it is differentiated.

    SymPy's d b**e = b**e (e b'/b + e' log b) divides by b and multiplies by log b; where b
    is 0 both are 0 * inf = NaN even where the derivative is finite: d x**p/dx at x = 0
    (p = 2: 0), d gamma**(t1 - t)/d gamma at t1 = t (d 1 = 0), d x**a/da at x = 0 (a > 0:
    0). Its partials, as torch's pow backward takes them:

        d/db b**e = where(e = 0, 0, e b**(e - 1))              (b**0 = 1 at every b)
        d/de b**e = where(b = 0 and e >= 0, 0, b**e log b)      (b**e -> 0 as b -> 0, e > 0)

    each mask left out where e (or b) is a nonzero number: a value SymPy proves positive
    still rounds to 0 (softplus(-800)**y). A numeric exponent is SymPy's: n b**(n - 1)
    divides by nothing.
    """

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        b, e = self.args
        if argindex == 1:
            d = e * sp.Pow(b, e - 1)
            return d if _nonzero(e) else where(zero_in_floats(e), 0, d)
        d = sp.Pow(b, e) * sp.log(b)
        return d if _nonzero(b) else where(zero_in_floats(b), where(e >= 0, 0, d), d)

    def _eval_is_real(self) -> bool | None:
        return sp.Pow(*self.args).is_real

    def _eval_is_extended_real(self) -> bool | None:
        return sp.Pow(*self.args).is_extended_real


class _root(sp.Function):  # noqa: N801
    """S**p, 0 < p < 1, of a sum of squares S (a norm, ``sqrt(Sum(x[d]**2, d))``), held while
    it is differentiated.

    Where S = 0 every squared entry is 0, and so is each partial of S (2 x dx): the chain
    multiplies p S**(p - 1) = inf by 0, NaN, where the forward is 0 and finite. As
    torch.linalg.vector_norm's backward, the root's partial is taken as 0 there:

        d/dS S**p = where(S = 0, 0, p S**(p - 1))

    which only ever meets a partial of S that is 0 where S is (found by probing: the gradient
    of a row's L2 norm, a triplet loss at a zero difference, an lp_pool over a zero window).
    """

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        b, p = self.args  # S = 0 where S**p is: read so, the root may fold into a saved norm
        if argindex == 2:  # an exponent read from a tensor (1/p of a p-norm): _power's partial
            d = sp.Pow(b, p) * sp.log(b)
            return where(zero_in_floats(b), where(p >= 0, 0, d), d)
        return where(zero_in_floats(sp.Pow(b, p)), 0, p * sp.Pow(b, p - 1))

    def _eval_is_real(self) -> bool | None:
        return sp.Pow(*self.args).is_real

    def _eval_is_extended_real(self) -> bool | None:
        return sp.Pow(*self.args).is_extended_real


def sums_of_squares(
    slots: dict[sp.Expr, sp.Symbol],
    flat: sp.Expr = sp.S.Zero,
    tensors: frozenset[str] = frozenset(),
) -> frozenset:
    """What stands for a sum of squares in ``flat``: the slots for a reduction that is one
    (``Sum(x[n, d]**2, d)``), and the reads of a tensor defined as one (``tensors``, from
    :func:`square_tensors`), as slots or as they stand in ``flat``."""
    found = {s for o, s in slots.items() if _reads_squares(o, tensors)}
    found |= {e for e in flat.atoms(sp.Indexed, sp.Symbol) if _reads_squares(e, tensors)}
    found |= {
        s
        for o, s in slots.items()
        if isinstance(o, sp.Sum) and _squares(o.function, _square_reads(o.function, tensors))
    }
    return frozenset(found)


def square_tensors(g: Graph) -> frozenset[str]:
    """The tensors defined as a sum of squares, maybe through others: ``sq[n] = Sum(x[n, d]**2,
    d)``, ``ms[n] = sq[n] / D``, ``e[n, d] = (x[n, d] - y[n, d])**2``, a view of one. A root of
    one read by name (``sqrt(sq[n])``) is held as a root of the sum itself (:class:`_root`):
    where it is 0 so is every entry it squares, and each partial on the way back to them."""
    found: set[str] = set()
    for step in g.steps:
        if isinstance(step, View):
            if step.source in found:
                found.add(step.name)
        elif _squares(step.body, _square_reads(step.body, frozenset(found))):
            found.add(step.name)
    return frozenset(found)


def _reads_squares(e: sp.Expr, tensors: frozenset[str]) -> bool:
    """``e`` reads a tensor of ``tensors`` (an entry, or a 0-d tensor whole)."""
    if isinstance(e, sp.Indexed):
        return e.base.label.name in tensors
    return isinstance(e, sp.Symbol) and not e.is_integer and e.name in tensors


def _square_reads(e: sp.Expr, tensors: frozenset[str]) -> frozenset:
    return frozenset(r for r in e.atoms(sp.Indexed, sp.Symbol) if _reads_squares(r, tensors))


def _squares(e: sp.Expr, squares: frozenset) -> bool:
    """``e`` is a sum of squares: an even power (or a positive one of a magnitude, |u|**p),
    a slot for one, or a sum or product of such with positive numeric weights: each term
    is 0 or more, and where the whole is 0 so is each term and each of its partials."""
    if e in squares:
        return True
    if isinstance(e, (sp.Pow, _power)):
        base, k = e.args
        if isinstance(base, sp.Abs):  # |u|**p: 0 only where u is (p > 0), its partial too (p >= 1)
            return not k.is_number or bool(k.is_positive)
        return isinstance(e, sp.Pow) and k.is_Integer and k > 0 and k % 2 == 0
    if isinstance(e, sp.Sum):
        return _squares(e.function, squares)
    if isinstance(e, sp.Abs):
        return True
    if isinstance(e, sp.Mul):  # weights: positive numbers and sizes (a mean of squares)
        weights = [f for f in e.args if f.is_positive and not f.has(sp.Indexed)]
        rest = [f for f in e.args if f not in weights]
        # a product of such: 0 where one factor is, and so is each partial (|x| x**2 is
        # SymPy's |x|**3)
        return bool(rest) and all(_squares(f, squares) for f in rest)
    if isinstance(e, sp.Add):
        return all(_squares(t, squares) for t in e.args)
    return False


def _roots_held(flat: sp.Expr, squares: frozenset) -> sp.Expr:
    """``flat`` with each root of a sum of squares held as :class:`_root`: a power 0 < p < 1,
    or one read from a tensor (a p-norm's 1/p, held as :class:`_power` already): where it
    is 0 or more, the mask is exact (the partial it meets is 0 there); below 0 the forward
    is inf at S = 0."""

    def root(e: sp.Basic) -> bool:
        if not isinstance(e, (sp.Pow, _power)):
            return False
        base, p = e.args
        numeric = p.is_Rational and 0 < p < 1 and isinstance(e, sp.Pow)
        return (numeric or not p.is_number) and _squares(base, squares)

    return flat.replace(root, lambda e: _root(*e.args))


def _nonzero(e: sp.Expr) -> bool:
    """A nonzero number: a mask on ``e = 0`` would never select. Not SymPy's ``is_zero``: a
    value it proves positive may still round to 0 (softplus(-800), a Sum of exp(-900))."""
    return e.is_number and e.is_zero is False


def _powers_held(flat: sp.Expr, slot: sp.Symbol) -> sp.Expr:
    """``flat`` with each power of a non-numeric exponent that reads ``slot`` held as
    :class:`_power` (its partials masked where SymPy's are 0 * inf)."""
    return flat.replace(
        lambda e: isinstance(e, sp.Pow) and not e.exp.is_Number and e.has(slot),
        lambda e: _power(*e.args),
    )


def _step_derivative(e: sp.Basic) -> bool:
    """A derivative of a step (sign, Heaviside), maybe at a point: 0 wherever it is defined."""
    inner = e.expr if isinstance(e, sp.Subs) else e
    return isinstance(inner, sp.Derivative) and isinstance(inner.expr, (sp.sign, sp.Heaviside))


def _mentions(expr: sp.Expr, name: str) -> bool:
    return any(i.base.label.name == name for i in expr.atoms(sp.Indexed))


def _argmax_tensor(step: Definition, g: Graph) -> Tensor | None:
    if not step.body.has(ReduceMax):
        return None
    if not isinstance(step.body, ReduceMax):
        raise DerivationError(g.op.name, "Max(f, c) must be the whole right-hand side", step.text)
    return Tensor(f"{step.name}_argmax", g.tensors[step.name].dims, integer=True)


def _contribution(step: Definition, g: Graph, adj: Adjoints, v: str, fresh: Fresh) -> sp.Expr:
    """sum_I du[I] * d body(I) / d v[J], with u's own indices renamed apart from J."""
    lhs = tuple(fresh() for _ in step.indices)
    body = freshen_bound(step.body, fresh).xreplace(dict(zip(step.indices, lhs, strict=True)))
    argmax = adj.argmax.get(step.name)
    pick = argmax.base[lhs] if argmax is not None and lhs else argmax and sp.Symbol(argmax.name)
    differentiate = _Differentiator(g.op.name, step.text, pick, adj.squares)
    partial = differentiate(body, v, adj.free[v])
    term = adj.symbol(step.name, lhs) * partial
    dims = g.tensors[step.name].dims
    limits = [(i, 0, d - 1) for i, d in zip(lhs, dims, strict=True)]
    return sp.Sum(term, *limits) if limits else term


def derive_adjoints(g: Graph, unseen: frozenset[str] = frozenset()) -> Adjoints:
    """Reverse mode over ``g``: the adjoint of every float tensor, step by step. A maximum in
    ``unseen``, one the output is proven not to see (:mod:`derive.symbolic.shifts`), has the
    adjoint 0 and passes nothing on: its argmax is never read."""
    names = {t: (GRAD_OUT if t == g.output else gradient_name(t)) for t in g.tensors}
    clash = sorted((t, a) for t, a in names.items() if a in g.tensors)
    if clash:
        said = ", ".join(f"'{a}' is the gradient of '{t}'" for t, a in clash)
        raise DerivationError(
            g.op.name, f"tensor names collide with gradient names ({said}): rename the tensor"
        )
    # a param or size of a gradient's name: the backward would read one as the other (a param
    # dx, x's gradient assigned over it, gave w's gradient 5x too large; found by probing)
    values = {
        str(s): kind for kind, group in (("param", g.params), ("size", g.sizes)) for s in group
    }
    clash = sorted((t, a) for t, a in names.items() if a in values)
    if clash:
        t, a = clash[0]
        whose = "the double backward's" if g.constants or g.gradient_only else "the backward's"
        raise DerivationError(
            g.op.name,
            f"{values[a]} '{a}' has the name of {whose} gradient of '{t}': rename the {values[a]}",
        )
    # an index never reads like a tensor (h[n, h] in exercise's docstring): names are avoided
    taken = frozenset({*g.tensors, *names.values(), *(str(s) for s in [*g.sizes, *g.params])})
    free = {t: nice_indices(info.dims, taken) for t, info in g.tensors.items()}
    adj = Adjoints(g, names, free, {}, taken=taken, squares=square_tensors(g))
    for step in g.steps:
        if isinstance(step, Definition) and (am := _argmax_tensor(step, g)) is not None:
            adj.argmax[step.name] = am
    fresh, live = adj.fresh, live_tensors(g)
    totals: dict[str, sp.Expr] = {t: sp.S.Zero for t in g.tensors}
    for step in reversed(g.steps):
        if step.name not in live:  # off every path to the output: it passes on an adjoint of 0
            continue
        if step.name in unseen:  # its adjoint is 0, proven: nothing passed on, no argmax read
            adj.unseen[step.name] = totals[step.name]
            totals[step.name] = sp.S.Zero
            continue
        if isinstance(step, View):
            totals[step.source] += _view_contribution(step, adj)
            continue
        for v in sorted(tensor_reads(step.body, g.tensors)):
            if not g.tensors[v].integer and v not in g.constants:
                totals[v] += _contribution(step, g, adj, v, fresh)
    adj.exprs = {
        t: e
        for t, e in totals.items()
        if t != g.output and not g.tensors[t].integer and t not in g.constants
    }
    return adj


def live_tensors(g: Graph, also: Iterable[str] = (), output: bool = True) -> set[str]:
    """The tensors the output (and ``also``; without ``output``, ``also`` alone) depend on.
    Any other's adjoint is 0, and it contributes nothing: written as dx * f'(x), its term would
    read 0 * inf where f' overflows (a stepwise op whose output does not read sinh(b**3) gave
    NaN for db; fuzz range probe, seed 120067)."""
    live = {g.output, *also} if output else set(also)
    for step in reversed(g.steps):
        if step.name in live:
            if isinstance(step, View):
                live.add(step.source)
            else:
                live |= tensor_reads(step.body, g.tensors)
    return live


def _view_contribution(step: View, adj: Adjoints) -> sp.Expr:
    """A view's adjoint is the reverse view of the output's adjoint: a structural tensor."""
    g = adj.graph
    name = f"{adj.names[step.name]}_as_{step.source}"
    adj.views[name] = (adj.names[step.name], step.source)
    base = sp.IndexedBase(name, shape=g.tensors[step.source].dims, real=True)
    return base[adj.free[step.source]]


def inline(
    adj: Adjoints,
    name: str,
    memo: dict[str, sp.Expr],
    step: Callable[[str], sp.Expr] | None = None,
    stop: frozenset[str] = frozenset(),
) -> sp.Expr:
    """The adjoint of ``name`` with every consumer's adjoint substituted, down to grad_out.

    ``step(t)`` is the form of tensor t's own step that is substituted (default: as reverse
    mode wrote it, ``adj.exprs[t]``); the adjoints of ``stop`` stay as they are (a collapse
    down to ``dprobs`` rather than grad_out). ``memo`` must hold results of one ``step`` and
    one ``stop`` only.
    """
    if name in memo:
        return memo[name]
    step = step or adj.exprs.__getitem__
    expr = step(name)
    g = adj.graph
    for view, (viewed, source) in adj.views.items():
        if viewed == GRAD_OUT or source in g.inputs:
            continue  # grad_out reshaped (the output is a view) is a leaf, as grad_out is
        if any(i.base.label.name == view for i in indexed_atoms(expr)):
            raise DerivationError(
                g.op.name,
                "view() of an intermediate is supported only with stepwise=True "
                "(a view of an input works in any op)",
            )
    by_symbol = {adj.names[t]: t for t in adj.exprs}
    replace = {}
    for ind in sorted(indexed_atoms(expr), key=sp.default_sort_key):
        owner = by_symbol.get(ind.base.label.name)
        if owner is not None and owner not in stop:
            inner = freshen_bound(inline(adj, owner, memo, step, stop), adj.fresh)
            free = adj.free[owner]
            replace[ind] = keep_padding(
                lambda at, inner=inner, free=free: substitute(
                    inner, dict(zip(free, at, strict=True))
                ),
                ind.indices,
                g.tensors[owner].dims,
            )
    for sym in symbol_atoms(expr):
        owner = by_symbol.get(sym.name)
        if owner is not None and owner not in stop and not adj.graph.tensors[owner].dims:
            replace[sym] = inline(adj, owner, memo, step, stop)
    memo[name] = substitute(expr, replace)
    return memo[name]
