"""Lowering: an index expression becomes kernel-IR nodes, printed as vectorized torch code.

Every node carries the indices that label its axes. Element-wise arithmetic becomes broadcast
torch ops (axes aligned with ``x[:, None]``); a Sum becomes a matmul when it is one, an einsum
for other two-tensor contractions, and ``.sum(dim)`` otherwise; a data index becomes a gather
(``C.index_select(0, idx)``, ``x.gather(1, t[:, None])``); a delta against a data index becomes
a ``scatter_add_`` or ``index_add_``, never a materialised one-hot. Nothing loops over elements.
Unsupported shapes of expression raise at generation time, naming the op.

In: SymPy index expressions with the axes they are wanted over; out: IR statements
(:mod:`derive.ir.nodes`) in the :class:`~derive.lower.context.Context`, rewritten by the IR's
passes (:mod:`derive.ir.sharing`, :mod:`derive.ir.passes`, :mod:`derive.ir.keepdim`: each
definition's own, then the whole function's) and printed
(:mod:`derive.ir.printer`) as :attr:`Lowerer.lines`, each a :class:`~derive.ir.printer.Line`
that keeps its statement. :data:`LOWERINGS` says which rule lowers which node class;
arithmetic lives in :mod:`derive.lower.arithmetic`, sums in :mod:`derive.lower.reductions`,
data-dependent indexing in :mod:`derive.lower.indexing`, selections in
:mod:`derive.lower.select`, assignments in :mod:`derive.lower.assign`. Where two kernels can
be one, a row of :data:`derive.lower.fusions.FUSIONS` says how.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

import sympy as sp

from derive.errors import DerivationError
from derive.functions import BY_NODE, clamp, where
from derive.ir import nodes as ir
from derive.ir.dead import dead_dropped
from derive.ir.fused import softmaxes
from derive.ir.given import given_guarded
from derive.ir.keepdim import kept_dims
from derive.ir.layout import contiguous_layouts
from derive.ir.needs import guarded
from derive.ir.orders import natural_orders
from derive.ir.passes import batched_matmuls, merged_siblings, released, stacked_siblings
from derive.ir.printer import TorchPrinter
from derive.ir.reshapes import reshapes_read_through
from derive.ir.reuse import into_operands
from derive.ir.scalars import EXTREMES, helpers_called, ieee_scalars
from derive.ir.sharing import common_subexpressions
from derive.ir.slices import merged_maps
from derive.ir.triangles import triangles
from derive.ir.unbind import unbound
from derive.language import Definition, ReduceMax
from derive.language.argmax import Digits
from derive.language.logs import logged_key
from derive.lower.arithmetic import (
    add,
    call,
    heaviside,
    mul,
    note_zeros,
    overflowing,
    power,
    shifted_maxima,
    written_order,
    zero_mask,
)
from derive.lower.assign import (
    assign,
    equality_scatter,
    is_scatter,
    is_solved_scatter,
    nested_inside,
    scatter,
    solved_scatter,
)
from derive.lower.context import Context
from derive.lower.equalities import gathered
from derive.lower.indexing import arange, clamped, digit, indexed, mask
from derive.lower.maxes import reduce_max_many, segment_max
from derive.lower.memo import canonical, repeated_sums
from derive.lower.reductions import sum_value
from derive.lower.select import given_value, relation, safe_indices, slice_constants, where_value
from derive.lower.value import AxisError, stem
from derive.symbolic.indices import free_indices, indexed_atoms
from derive.symbolic.seeds import given

PRINTER = TorchPrinter()


class Lowerer:
    """Lowers the statements of one generated function; collects their printed lines."""

    def __init__(
        self,
        op: str,
        known: set[str],
        sizes: dict[sp.Symbol, sp.Expr],
        scalars: set[str] | None = None,
        device_of: str = "grad_out",
        guarded: set[str] | None = None,
        derived: dict[sp.Symbol, sp.Expr] | None = None,
        data_ranges: dict[str, sp.Expr | Digits] | None = None,
        checked: set[tuple[str, sp.Expr]] | None = None,
        integers: set[str] | None = None,
        finite: set[str] | None = None,
        params: Mapping[str, float] | None = None,
        steps: list | None = None,
        sums: tuple[sp.Expr, ...] = (),
        logs: tuple[tuple[sp.Expr, frozenset[str]], ...] = (),
    ) -> None:
        self.context = Context(
            op, known, sizes, lower, set(scalars or ()), device_of, set(guarded or ())
        )
        self.context.derived.update(derived or {})
        self.context.data_ranges.update(data_ranges or {})
        self.context.checked.update(checked or ())
        self.context.integers.update(integers or ())
        self.context.finite.update(finite or ())
        maxima, shifted = shifted_maxima(steps or [])  # the forward's steps (a product's order)
        self.context.maxima.update(maxima)
        self.context.shifted.update(shifted)
        self.context.overflowing.update(overflowing(steps or []))
        self.context.sums = written_order(sums)
        for u, reads in logs:
            self.context.logged.setdefault(logged_key(u), []).append(reads)
        self._params = frozenset(params or ())  # python numbers a caller sets (see scalars)
        # an int param (a stride) is never inf: only float ones may make a product non-finite
        self.context.params = frozenset(
            n for n, v in (params or {}).items() if not isinstance(v, int)
        )
        self._lines: list[str] | None = None  # printed once every statement is in
        self._keep: frozenset[str] | None = None  # names to free after their last use but these
        self._returns: frozenset[str] | None = None  # what a function that frees nothing returns
        self._results: dict[str, int] = {}  # gradient -> its flag in ``needs`` (see results())
        self._named: set[str] = set()  # what assign() bound: a definition's or adjoint's name

    @property
    def lines(self) -> list[str]:
        """The function's statements, rewritten by the passes that see all of them (siblings
        of one contraction may be lowered from different definitions), then printed; read
        once the lowering is done (no statement is added after)."""
        cx = self.context
        if self._lines is None:
            # without a release (a tangent map), every tensor of the definitions is kept
            keep = cx.known if self._keep is None else self._keep
            merged = merged_maps(merged_siblings(cx.statements, cx.fresh), cx.fresh, keep)
            products = batched_matmuls(stacked_siblings(merged, cx.fresh))
            shared = reshapes_read_through(
                # the lowering's own temporaries may merge; a name assign() bound stays
                common_subexpressions(products, cx.fresh, set(keep) | self._named),
                self._returns if self._keep is None else self._keep,
            )
            if self._keep is not None:  # a fused kernel's parts go only where none is handed on
                shared = softmaxes(shared, self._keep)
            cx.statements[:] = natural_orders(contiguous_layouts(shared, self._keep), keep)
            hand_on = self._keep if self._keep is not None else self._returns
            if hand_on is not None:  # nothing reads a name a rewrite left unread
                cx.statements[:] = dead_dropped(cx.statements, hand_on)
            if self._keep is not None:  # what the function hands on keeps its shape
                cx.statements[:] = released(kept_dims(cx.statements, self._keep), self._keep)
            cx.statements[:] = ieee_scalars(unbound(triangles(cx.statements)), self._params)
            if self._results:
                cx.statements[:] = given_guarded(guarded(cx.statements, self._results))
            else:  # a tangent map's terms given on its input tangents (seeds.gated_tangents)
                cx.statements[:] = given_guarded(cx.statements)
            cx.statements[:] = into_operands(cx.statements, cx.integers)
            self._lines = [PRINTER.line(s) for s in cx.statements]
        return list(self._lines)

    def release(self, keep: Collection[str]) -> None:
        """Free every tensor the statements compute after its last use, but those in ``keep``
        (:func:`~derive.ir.passes.released`): set before the lines are read."""
        if self._lines is not None:
            raise AssertionError(f"{self.context.op}: release() after the lines were printed")
        self._keep = frozenset(keep)

    def results(self, positions: dict[str, int]) -> None:
        """The gradients a backward returns, each with its flag's position in the caller's
        ``needs``: a statement that feeds only gradients nobody needs is skipped
        (:mod:`derive.ir.needs`). Set before the lines are read."""
        if self._lines is not None:
            raise AssertionError(f"{self.context.op}: results() after the lines were printed")
        self._results = dict(positions)

    def returns(self, names: Collection[str]) -> None:
        """The names a function that frees nothing (a tangent map) returns: a view that no
        statement reads any longer once a reshape reads through it then goes (with
        :meth:`release`, its ``keep`` says so)."""
        if self._lines is not None:
            raise AssertionError(f"{self.context.op}: returns() after the lines were printed")
        self._returns = frozenset(names)

    @property
    def wrapping(self) -> set[str]:
        """Int inputs read by advanced indexing (their range is checked before a forward)."""
        return self.context.wrapping

    @property
    def modules(self) -> set[str]:
        """The python modules the statements call (``math`` for a function of a param)."""
        return {
            "math"
            for s in self.context.statements
            for root in s.nodes()
            for n in ir.walk(root)
            if isinstance(n, ir.Apply) and ("math." in n.form or helpers_called(n) - set(EXTREMES))
        }

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
                    (self.context.repeated if key in seen else seen).add(key)
        self.context.shared_sums |= repeated_sums(exprs)

    # -- entry points: each lowers into statements, then prints them ------------------------
    def reshape(self, name: str, source: str, dims: tuple) -> None:
        """``name = source.reshape(dims)``: a view in the forward, its reverse in the backward."""
        start = len(self.context.statements)
        shape = tuple(self.context.value(x, []) for x in dims)
        self.context.emit(ir.Assign((name,), ir.Reshape(ir.Ref(source), shape)))
        self._rewrite(start)

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
        cx, start = self.context, len(self.context.statements)
        var, lo, hi = body.limits[0]
        cx.learn([(var, hi - lo + 1)])
        # every index's range, for an index compared in a where() (an arange over it)
        cx.learn(zip(axes, dims, strict=True))
        if len(body.limits) > 1:  # one argmax over several indices (derive/lower/maxes.py)
            reduce_max_many(cx, name, body, axes, argmax, text)
            self._rewrite(start)
            return
        if segment_max(cx, name, body, axes, argmax):  # a scatter_reduce (derive/lower/maxes.py)
            self._rewrite(start)
            return
        function = safe_indices(cx, slice_constants(cx, body.function))
        value = cx.value(function, list(axes) + [var])
        if var not in value.axes:
            raise DerivationError(cx.op, "Max over an index the body does not use", text)
        dim, kept = value.axes.index(var), tuple(a for a in value.axes if a != var)
        targets, kind = ((name, argmax), "max") if argmax is not None else ((name,), "amax")
        cx.emit(ir.Assign(targets, ir.Reduce(kind, value, (dim,), axes=kept)))
        self._rewrite(start)

    def assign(self, name: str, expr: sp.Expr, axes: tuple[sp.Symbol, ...], dims: tuple) -> None:
        """Emit ``name = <expr>`` with axes in ``axes`` order (one-hots and scatters included)."""
        start = len(self.context.statements)
        self._named.add(name)
        try:
            assign(self.context, name, expr, axes, dims)
            self._rewrite(start)
            note_zeros(self.context, name, sp.sympify(expr), axes)
        except (AxisError, ValueError) as exc:  # a shape the lowering cannot do: say so, clearly
            raise DerivationError(self.context.op, f"cannot lower {name} = {expr}: {exc}") from None

    def saved_zeros(self, steps: list, saved: Collection[str]) -> None:
        """Remember the zero masks (:func:`~derive.lower.arithmetic.note_zeros`) of the
        forward's ``steps`` that the backward reads ``saved``, where the mask reads only saved
        tensors too: a second order's ``dx = -b_dx / x * v`` reads the first backward's
        ``b_dx = where(x > 0, g / x, 0)`` beside a division by x, 0 / 0 = nan at x = 0 where
        the second derivative is 0 (found by probing); with the mask, it is selected."""
        cx = self.context
        for step in steps:
            if not isinstance(step, Definition) or step.name not in saved:
                continue
            if isinstance(step.body, ReduceMax):
                continue
            mask = zero_mask(step.body)
            reads = {i.base.label.name for i in mask.atoms(sp.Indexed)}
            reads |= {s.name for s in mask.atoms(sp.Symbol)} & {s.name for s in steps}
            if reads <= set(saved):
                note_zeros(cx, step.name, step.body, step.indices)

    def _rewrite(self, start: int) -> None:
        """The statements from ``start`` on (one entry's), rewritten by the IR's passes."""
        cx = self.context
        if self._lines is not None:
            raise AssertionError(f"{cx.op}: a statement lowered after the function was printed")
        cx.statements[start:] = common_subexpressions(cx.statements[start:], cx.fresh)


def _is_call(e: sp.Basic) -> bool:
    """A function call worth computing once: a registry function or a step."""
    return (type(e) in BY_NODE or isinstance(e, sp.Heaviside)) and bool(indexed_atoms(e))


def lower(cx: Context, e: sp.Expr, order: list[sp.Symbol]) -> ir.Node:
    """``e`` lowered; a call met more than once is computed once, into a name."""
    if not (_is_call(e) and canonical(e)[0] in cx.repeated):
        return _lowered(cx, e, order)
    v = cx.recall_call(e)  # computed already, maybe under other index names
    if v is None:
        v = _lowered(cx, e, order)
        if not v.scalar:
            name = cx.fresh(f"{type(e).__name__.lower()}_{stem(e)}")
            cx.emit(ir.Assign((name,), v))
            v = ir.Ref(name, axes=v.axes)
        cx.remember_call(e, v)
    return cx.permuted(v, order)


def _lowered(cx: Context, e: sp.Expr, order: list[sp.Symbol]) -> ir.Node:
    if e.is_number:  # pi, sqrt(2/pi), 1/3: one python number, rounded once from SymPy's value
        return ir.Number(e)
    for cls in type(e).__mro__:  # the nearest class with a row, as SymPy's printers do
        rule = LOWERINGS.get(cls)
        if rule is not None:
            return rule(cx, e, order)
    if e.func in BY_NODE:
        return call(cx, BY_NODE[e.func], e.args, order)
    raise DerivationError(cx.op, f"cannot lower {e} ({type(e).__name__}) to torch")


def _sum(cx: Context, e: sp.Sum, order: list[sp.Symbol]) -> ir.Node:
    """A sum that is a scatter, ``sum_n delta(v, t[n]) g`` among other terms (a tied
    embedding's adjoint: the output projection's ``g^T h`` plus the lookup's scatter), is one
    ``index_add_`` (or ``scatter_add_``) into a name of its own, as a whole assignment of one
    is (:func:`derive.lower.assign.scatter`); the masks made a (V, C, N) product there. So
    is a sum of deltas each solved for a target axis (``assign.solved_scatter``: a gather
    and a stride together, fuzz --affine 4022's second order, masks over 7 axes). Any other
    sum: :func:`derive.lower.reductions.sum_value`."""
    # a sum met inside another's part: the equality rules here too, and the reads they make
    # at a guarded int input (g = cls[b] under where(cls[b] < 0, ..)) clamped, as assign's
    solved = gathered(cx, e)
    if solved != e:
        return cx.value(safe_indices(cx, solved), order)
    free = free_indices(e)
    axes = tuple(a for a in order if a in free)
    if len(axes) == len(free) and cx.recall(e) is None:
        write, flat = None, equality_scatter(cx, e, axes) or nested_inside(cx, e, axes)
        if is_solved_scatter(cx, e, axes):  # every delta solved, as an assignment tries first
            write, flat = solved_scatter, e
        elif is_scatter(cx, flat, axes):  # a count's sum inside unnested: an embedding bag
            write = scatter
        if write is not None:
            name = cx.fresh("sum_" + stem(e))
            write(cx, name, flat, axes)
            cx.remember(e, ir.Ref(name, axes=axes))
            return cx.permuted(ir.Ref(name, axes=axes), order)
    return sum_value(cx, e, order)


def _symbol(cx: Context, s: sp.Symbol, order: list[sp.Symbol]) -> ir.Node:
    if s.name in cx.aliases:  # one entry of a tensor, W[1, 2]: a 0-d tensor
        return ir.relabel(cx.aliases[s.name], ())
    if cx.is_axis(s) and s in cx.sizes:  # an index as a number: slope * (i - j)
        return ir.Cast(arange(cx, s, cx.sizes[s]), cx.like, axes=(s,))
    if s.name not in cx.known:
        raise DerivationError(cx.op, f"'{s}' has no value in the generated function")
    return ir.Ref(s.name, scalar=s.name in cx.scalars)


# The lowering of each node class, one row each (registry functions: :func:`call`)
LOWERINGS: dict[type, Callable[[Context, sp.Expr, list[sp.Symbol]], ir.Node]] = {
    sp.Symbol: _symbol,
    sp.Indexed: indexed,
    sp.Add: add,
    sp.Mul: mul,
    sp.Pow: power,
    sp.Sum: _sum,
    sp.Heaviside: heaviside,
    sp.KroneckerDelta: mask,
    sp.floor: digit,
    sp.Mod: digit,
    sp.core.relational.Relational: relation,
    where: where_value,
    clamp: clamped,
    given: given_value,
}
