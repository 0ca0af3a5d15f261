"""Lowering: an index expression becomes vectorized torch code.

Every value carries the indices that label its axes. Element-wise arithmetic becomes broadcast
torch ops (axes aligned with ``x[:, None]``); a Sum becomes a matmul when it is one, an einsum
for other two-tensor contractions, and ``.sum(dim)`` otherwise; a data index becomes a gather
(``C.index_select(0, idx)``, ``x.gather(1, t[:, None])``); a delta against a data index becomes
a ``scatter_add_`` or ``index_add_``, never a materialised one-hot. Nothing loops over elements.
Unsupported shapes of expression raise at generation time, naming the op.

In: SymPy index expressions with the axes they are wanted over; out: python statements, one
string each, collected in :attr:`Lowerer.lines`. The lowerer dispatches on the node's class;
arithmetic lives in :mod:`derive.lower.arithmetic`, sums in :mod:`derive.lower.reductions`,
data-dependent indexing in :mod:`derive.lower.indexing`, the shared pure helpers in
:mod:`derive.lower.value`. Where two kernels can be one, a row of
:data:`derive.lower.fusions.FUSIONS` says how; its match reads a :class:`Scope` only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp

from derive.errors import DerivationError
from derive.functions import BY_NODE, where
from derive.language import ReduceMax
from derive.lower.arithmetic import add, call, mul, power, step
from derive.lower.fusions import fuse
from derive.lower.indexing import indexed, mask, materialise, pick_update, scatter
from derive.lower.memo import Computed, canonical, memo_entry, recall, repeated_sums
from derive.lower.reductions import sum_value
from derive.lower.select import Selections
from derive.lower.value import (
    ATOM,
    MUL,
    UNARY,
    AxisError,
    PickUpdate,
    Scope,
    Value,
    number,
    permute,
    position,
    scatter_delta,
    split_deltas,
)
from derive.symbolic.indices import free_indices


def _is_call(e: sp.Basic) -> bool:
    """A function call worth computing once: a registry function or a step."""
    return (type(e) in BY_NODE or isinstance(e, sp.Heaviside)) and bool(e.atoms(sp.Indexed))


def _stem(e: sp.Expr) -> str:
    return "_".join(sorted({i.base.label.name for i in e.atoms(sp.Indexed)}))


@dataclass
class Lowerer(Selections):
    """Lowers expressions of one function body; collects the statements they need."""

    op: str
    known: set[str]  # the names with a value in the generated function (tensors, sizes, params)
    sizes: dict[sp.Symbol, sp.Expr]  # index -> its range (for aranges and einsum checks)
    lines: list[str] = field(default_factory=list)
    memo: dict[tuple, Value] = field(default_factory=dict)  # see recall / remember
    taken: set[str] = field(default_factory=set)
    scalars: set[str] = field(default_factory=set)  # names bound to python numbers (sizes, params)
    wrapping: set[str] = field(default_factory=set)  # int inputs read by advanced indexing
    repeated: set[sp.Expr] = field(default_factory=set)  # calls met twice (canonical keys)
    bound: dict[tuple, Value] = field(default_factory=dict)  # ...each computed once (a memo)
    modules: set[str] = field(default_factory=set)  # python modules the code uses (math)
    guarded: set[str] = field(default_factory=set)  # int inputs a where() guards (see select)
    # names standing for code read in place (see select): a slice ``Wh_at_all_1 -> Wh[:, 1]``,
    # a guarded index read clamped ``targets_index -> targets.clamp(min=0)``
    aliases: dict[str, str] = field(default_factory=dict)
    shared_sums: set[sp.Expr] = field(default_factory=set)  # canonical keys of sums met twice

    def share(self, exprs: list[sp.Expr]) -> None:
        """Note the function calls (exp, tanh, sigmoid, ...) that occur more than once in the
        statements of this function: each is then computed once into a name and reused; and
        the sums that occur more than once (under any index names), which a contraction then
        reads as one tensor instead of taking their factors in (see ``_flattened``)."""
        seen: set[sp.Expr] = set()
        for e in exprs:
            for node in sp.preorder_traversal(e):
                if _is_call(node):  # under any index names: tanh(h[n, k]) is tanh(h[m, j])
                    key = canonical(node)[0]
                    (self.repeated if key in seen else seen).add(key)
        self.shared_sums |= repeated_sums(exprs)

    device_of: str = "grad_out"  # a tensor whose device/dtype new tensors take

    # -- entry points -----------------------------------------------------------------------
    def reshape(self, name: str, source: str, dims: tuple) -> None:
        """``name = source.reshape(dims)``: a view in the forward, its reverse in the backward."""
        shape = ", ".join(self.value(x, []).code for x in dims)
        self.lines.append(f"{name} = {source}.reshape({shape})")

    def reduce_max(
        self,
        name: str,
        body: ReduceMax,
        axes: tuple,
        dims: tuple,
        argmax: str | None,
        text: str = "",
    ) -> None:
        """``name[axes] = Max(f, c)`` as ``.amax``, or ``.max`` when the backward reads the
        argmax (``argmax`` names it): the adjoint of a Max flows to the maximising entry."""
        var, lo, hi = body.limits[0]
        self.sizes[var] = hi - lo + 1
        # every index's range, for an index compared in a where() (an arange over it)
        self.sizes.update(zip(axes, dims, strict=True))
        function = self.safe_indices(self.slice_constants(body.function))
        value = self.value(function, list(axes) + [var])
        if var not in value.axes:
            raise DerivationError(self.op, "Max over an index the body does not use", text)
        dim = value.axes.index(var)
        if argmax is not None:
            self.lines.append(f"{name}, {argmax} = {value.wrap(ATOM)}.max({dim})")
        else:
            self.lines.append(f"{name} = {value.wrap(ATOM)}.amax({dim})")

    def assign(self, name: str, expr: sp.Expr, axes: tuple[sp.Symbol, ...], dims: tuple) -> None:
        """Emit ``name = <expr>`` with axes in ``axes`` order (one-hots and scatters included)."""
        try:
            self._assign(name, expr, axes, dims)
        except (AxisError, ValueError) as exc:  # a shape the lowering cannot do: say so, clearly
            raise DerivationError(self.op, f"cannot lower {name} = {expr}: {exc}") from None

    def _assign(self, name: str, expr: sp.Expr, axes: tuple[sp.Symbol, ...], dims: tuple) -> None:
        self.taken.add(name)
        self.sizes.update(zip(axes, dims, strict=True))
        expr = self.safe_indices(self.slice_constants(expr))
        if not expr.has(sp.KroneckerDelta):
            return self._assign_plain(name, expr, axes)
        if self._stack(name, expr, axes):
            return None
        form = self._delta_form(expr, axes)
        if form == "scatter":
            return scatter(self, name, expr, axes)
        # one-hot terms become in-place updates of the rest; a delta no update writes (two of
        # them in a term, or one against an argmax) becomes an equality mask, always right
        plain, picks = form if form is not None else (expr, [])
        value = materialise(self, self._checked(plain, axes, name), axes, fresh=bool(picks))
        self.lines.append(f"{name} = {value}")
        for coef, axis, data in picks:
            pick_update(self, name, coef, axis, data, axes)

    def _delta_form(self, expr: sp.Expr, axes: tuple) -> str | tuple | None:
        """How an assignment with deltas is written, decided before anything is lowered:
        ``"scatter"`` (one ``index_add_``), ``(plain, picks)`` (the rest, then one in-place
        update per one-hot term), or None (equality masks)."""
        found = scatter_delta(expr, axes) if isinstance(expr, sp.Sum) else None
        if found is not None:
            delta, axis, _ = found
            rest = sp.Mul(*[f for f in sp.Mul.make_args(expr.function) if f is not delta])
            source = [a for a in axes if a != axis] + [lim[0] for lim in expr.limits]
            # the source is read over exactly the other axes and the summed ones, in any order
            return "scatter" if self.scope(source).axes(rest) == set(source) else None
        try:
            plain, picks = split_deltas(expr, axes)
        except ValueError:
            return None
        for coef, axis, data in picks:  # an update reads its coefficient over the other axes
            others = self.scope([a for a in axes if a != axis])
            if not others.axes(coef) | others.axes(data) <= set(others.order):
                return None
        return plain, picks

    def _assign_plain(self, name: str, expr: sp.Expr, axes: tuple) -> None:
        if isinstance(expr, sp.Sum) and self.recall(expr) is None:
            # a sum that reads every axis is bound to ``name`` (then permuted in place, its memo
            # entry with it); one broadcast over axes it does not read keeps a name of its own,
            # which the memo holds: dZz = sum(g) expanded to Y is not the sum a later dW1 reads
            whole = set(axes) <= free_indices(expr)
            sum_value(self, expr, list(axes), name=name if whole else None)
            stored = self.recall(expr)  # in the order it came out
            if stored.axes != axes:
                stored = self._exact(stored, axes, name, partial=True)
                self.lines.append(f"{name} = {materialise(self, stored, axes, fresh=False)}")
                if whole:
                    self.remember(expr, Value(name, axes))
            return
        value = materialise(self, self._checked(expr, axes, name), axes, fresh=False)
        self.lines.append(f"{name} = {value}")

    def recall(self, e: sp.Expr) -> Value | None:
        """The tensor computed for ``e`` (under any names of its indices), on e's axes."""
        return recall(self.memo, e)

    def remember(self, e: sp.Expr, v: Value) -> None:
        """Remember ``v`` as the value of ``e``: under any index names when its axes are
        exactly e's free indices, else (broadcast, or axes labelled by data) under e's own."""
        key, value = memo_entry(e, v)
        self.memo[key] = value

    def _checked(self, e: sp.Expr, axes: tuple, name: str) -> Value:
        value = self.value(e, list(axes))
        return value if value.scalar else self._exact(value, axes, name, partial=True)

    def _exact(self, v: Value, axes: tuple, name: str, partial: bool = False) -> Value:
        """``v`` permuted to ``axes`` (all of them unless ``partial``): the one guard that an
        assignment's axis order is the target's, whatever order the lowering found it in."""
        try:
            out = permute(v, axes)
        except AxisError as exc:
            raise DerivationError(self.op, f"cannot lower {name}: {exc}") from None
        if not partial and out.axes != axes:
            raise DerivationError(self.op, f"cannot lower {name}: axes {out.axes} for {axes}")
        return out

    def value(self, e: sp.Expr, order: list[sp.Symbol]) -> Value:
        e = sp.sympify(e)
        if _is_call(e) and canonical(e)[0] in self.repeated:
            v = recall(self.bound, e)  # computed already, maybe under other index names
            if v is None:
                v = self._value(e, order)
                if not v.scalar:
                    name = self._name(f"{type(e).__name__.lower()}_{_stem(e)}")
                    self.lines.append(f"{name} = {v.code}")
                    v = Value(name, v.axes)
                key, entry = memo_entry(e, v)
                self.bound[key] = entry
            return self._permuted(v, order)
        return self._value(e, order)

    def _value(self, e: sp.Expr, order: list[sp.Symbol]) -> Value:
        if e.is_Number:  # "1 / 3" binds like a product: parenthesised where that matters
            prec = UNARY if e < 0 else ATOM if e.is_Integer or e.is_Float else MUL
            return Value(number(e), scalar=True, prec=prec)
        if e.is_number:  # pi, sqrt(2/pi): one python float, rounded once from SymPy's value
            return Value(number(e), scalar=True, prec=ATOM if e >= 0 else UNARY)
        for cls in type(e).__mro__:  # the nearest class with a row, as SymPy's printers do
            lower = LOWERINGS.get(cls)
            if lower is not None:
                return lower(self, e, order)
        if e.func in BY_NODE:
            return call(self, BY_NODE[e.func], e.args, order)
        raise DerivationError(self.op, f"cannot lower {e} ({type(e).__name__}) to torch")

    # -- leaves -----------------------------------------------------------------------------
    def _symbol(self, s: sp.Symbol) -> Value:
        if s.name in self.aliases:  # one entry of a tensor, W[1, 2]: a 0-d tensor
            return Value(self.aliases[s.name], (), ATOM)
        if s.name not in self.known:
            raise DerivationError(self.op, f"'{s}' has no value in the generated function")
        return Value(s.name, (), ATOM, scalar=s.name in self.scalars)

    def _is_axis(self, i: sp.Expr) -> bool:
        return self.scope([]).is_axis(i)

    def scope(self, order: list[sp.Symbol]) -> Scope:
        """What a fusion's match may read: the names, the sums computed, the order wanted."""
        computed = Computed(self.memo)
        return Scope(self.scalars, computed, self.sizes.keys(), tuple(order), self.shared_sums)

    def fuse(self, site: sp.Expr | PickUpdate, order: list[sp.Symbol]) -> Value | str | None:
        """The fused code for ``site`` when a row of :data:`~derive.lower.fusions.FUSIONS`
        matches it, else None (the plain lowering goes on)."""
        return fuse(self, site, order)

    def _permuted(self, v: Value, order: list[sp.Symbol]) -> Value:
        """``v`` with its axes in ``order``'s order (axes ``order`` lacks go last)."""
        return permute(v, tuple(sorted(v.axes, key=position(order))))

    # -- names ------------------------------------------------------------------------------
    def _size(self, axis: sp.Symbol) -> str:
        return self.value(self.sizes[axis], []).code

    def _temp(self, e: sp.Sum) -> str:
        return self._name("sum_" + _stem(e))

    def _name(self, stem: str) -> str:
        names = (stem if k == 0 else f"{stem}_{k}" for k in itertools.count())
        # never a name the function already holds: an input ``t_W`` is no temporary's to take
        name = next(n for n in names if n not in self.taken and n not in self.known)
        self.taken.add(name)
        return name


# The lowering of each node class, one row each (registry functions: :func:`call`)
LOWERINGS: dict[type, Callable[[Lowerer, sp.Expr, list[sp.Symbol]], Value]] = {
    sp.Symbol: lambda lw, e, order: lw._symbol(e),
    sp.Indexed: indexed,
    sp.Add: add,
    sp.Mul: mul,
    sp.Pow: power,
    sp.Sum: sum_value,
    sp.Heaviside: step,
    sp.KroneckerDelta: mask,
    sp.core.relational.Relational: Selections._relation,
    where: Selections._where,
}
