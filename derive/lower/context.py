"""The state of one generated function's lowering, and the only way a lowering rule changes it.

Every rule (:mod:`~derive.lower.arithmetic`, :mod:`~derive.lower.reductions`, ...) takes a
:class:`Context`: it reads what is known (names, index ranges, the tensors computed so far),
lowers sub-expressions through :meth:`Context.value`, and adds to the function only through
its methods: :meth:`~Context.emit` a statement, :meth:`~Context.fresh` a name,
:meth:`~Context.learn` index ranges, :meth:`~Context.remember` a computed tensor,
:meth:`~Context.alias` a view read in place. Nothing reaches into another module's state.

Which rule lowers which node class is the lowerer's table (:mod:`derive.lower.lowerer`),
handed in as ``dispatch``: this module imports no rule, every rule imports this one.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import sympy as sp

from derive.errors import EngineBug
from derive.functions import BY_NODE, clamp, where
from derive.ir import nodes as ir
from derive.language import ReduceMax
from derive.language.argmax import Digits
from derive.lower.memo import Computed, memo_entry, recall
from derive.lower.value import Scope, align, permute, position, union
from derive.symbolic.indices import indexed_atoms


def _free_axes(cx: Context, e: sp.Expr) -> list[sp.Symbol]:
    """The index symbols ``e`` depends on: free, integer, not a size, a param or an alias."""
    names = cx.scalars | set(cx.aliases)
    labels = {x.base.label for x in indexed_atoms(e)}
    return [
        s
        for s in e.free_symbols - labels
        if isinstance(s, sp.Symbol) and s.is_integer and s.name not in names
    ]


def _expanded_indices(e: sp.Expr) -> sp.Expr:
    """``e`` with each index expression expanded (subscripts, comparisons, deltas):
    ``x[f*G + g - G*(f + 3) + 3*G]`` is ``x[g]``, as the lowering reads it (an affine index
    is expanded before it is lowered), so f is no free index of it."""
    kinds = (sp.Indexed, sp.core.relational.Relational, sp.KroneckerDelta)
    swap = {}
    for x in e.atoms(*kinds):
        if isinstance(x, sp.Indexed):
            swap[x] = x.base[tuple(sp.expand(i) for i in x.indices)]
        else:
            swap[x] = x.func(*(sp.expand(a) for a in x.args))
    return e.xreplace(swap)


Dispatch = Callable[["Context", sp.Expr, list], ir.Node]


def as_ints(cx: Context, e: sp.Expr) -> sp.Expr:
    """``e`` with each 0-d int tensor (an argmax, read as a real symbol as every 0-d tensor
    is) taken as the integer it holds."""
    names = cx.integers | cx.data_ranges.keys()
    ints = {s: sp.Dummy(s.name, integer=True) for s in e.free_symbols if s.name in names}
    return e.xreplace(ints)


def lowers_to_int(cx: Context, e: sp.Expr) -> bool:
    """Whether ``e`` lowers to an int64 tensor: a clamped index, a digit of an argmax, int data
    or a 0-d argmax, and sums, products, powers, maxima and selections of these with whole
    python numbers. A plain index is no such thing: it is cast where it is read."""
    if isinstance(e, (clamp, sp.floor, sp.Mod)):
        return True
    if isinstance(e, sp.Indexed):
        return e.base.label.name in cx.integers or bool(e.base.is_integer)
    if isinstance(e, sp.Symbol):
        return e.name in cx.integers
    if isinstance(e, sp.Pow):
        return lowers_to_int(cx, e.base) and e.exp.is_Integer and e.exp >= 0
    if isinstance(e, (sp.Sum, ReduceMax)):
        return lowers_to_int(cx, e.function)
    if not isinstance(e, (sp.Add, sp.Mul, where)):
        return False
    found = False
    for a in e.args[1:] if isinstance(e, where) else e.args:
        if lowers_to_int(cx, a):
            found = True
        elif not (cx.scope([]).scalar(a) and as_ints(cx, a).is_integer is True):
            return False  # a float tensor or a python float: the result is not an int tensor
    return found


def computes(e: sp.Expr) -> bool:
    """Whether ``e``'s operands are numbers it computes with (a sum, product, power, function
    or selection of them)."""
    return isinstance(e, (sp.Add, sp.Mul, sp.Pow, where)) or type(e) in BY_NODE


# what stands on :attr:`Context.within` while an index is built outside any expression's rule
# (a scatter's target positions, a window's origin)
INDEXING = sp.Symbol("_indexing")
# the expressions whose operands are indices (subscripts, comparisons, deltas, clamps, digits)
READS_INDICES = (
    sp.Indexed,
    sp.KroneckerDelta,
    sp.core.relational.Relational,
    clamp,
    sp.floor,
    sp.Mod,
)


@dataclass
class Context:
    """What one function's lowering has produced so far, and what it may read."""

    op: str
    known: set[str]  # the names with a value in the generated function (tensors, sizes, params)
    sizes: dict[sp.Symbol, sp.Expr]  # index -> its range (for aranges and einsum checks)
    dispatch: Dispatch  # lowers one expression by its class (the lowerer's table)
    scalars: set[str] = field(default_factory=set)  # names bound to python numbers
    device_of: str = "grad_out"  # a tensor whose device/dtype new tensors take
    guarded: set[str] = field(default_factory=set)  # int inputs a where() guards (see select)
    statements: list[ir.Statement] = field(default_factory=list)
    memo: dict[tuple, ir.Node] = field(default_factory=dict)  # see recall / remember
    taken: set[str] = field(default_factory=set)
    wrapping: set[str] = field(default_factory=set)  # int inputs read by advanced indexing
    repeated: set[sp.Expr] = field(default_factory=set)  # calls met twice (canonical keys)
    bound: dict[tuple, ir.Node] = field(default_factory=dict)  # ...each computed once (a memo)
    # names standing for a view read in place (see select): a slice ``Wh_at_all_1 -> Wh[:, 1]``,
    # a guarded index read clamped ``targets_index -> targets.clamp(min=0)``
    aliases: dict[str, ir.Node] = field(default_factory=dict)
    shared_sums: set[sp.Expr] = field(default_factory=set)  # canonical keys of sums met twice
    # derived sizes and their definitions (HO -> floor((H - KH)/S) + 1), for proofs on sizes
    # (derive.lower.bounds: a window's padding handed to torch's kernel)
    derived: dict[sp.Symbol, sp.Expr] = field(default_factory=dict)
    # int data whose values are known to lie in 0..hi (an argmax the forward saved: the position
    # of a Max over 0..hi), name -> hi, for proofs that an index built from it stays in range
    data_ranges: dict[str, sp.Expr | Digits] = field(default_factory=dict)
    # (int data, size) the module checks before any kernel reads it: every entry lies in
    # [0, size), as a subscript of an axis of that size asks (derive.emit.checks)
    checked: set[tuple[str, sp.Expr]] = field(default_factory=set)
    # int tensors the function makes from data compared with an index, each entry outside the
    # index's axis sent one past it (derive.lower.equalities.spare_index): name -> (the
    # positions' expression, the size)
    spare: dict[str, tuple[sp.Expr, sp.Expr]] = field(default_factory=dict)
    # the int tensors (inputs, saved argmaxes): a 0-d one is read as a real symbol, as every
    # 0-d tensor is, and an argmax's digits (floor(a/W), Mod(a, W)) need to know it is whole
    integers: set[str] = field(default_factory=set)
    # tensors a caller passes (inputs, grad_out): finite wherever they are read. A tensor the
    # function computes may hold an overflow (exp(800) = inf) where a where() drops it
    finite: set[str] = field(default_factory=set)
    # float params: python numbers a caller sets, inf or nan as a caller may make them (a where()
    # of log(alpha) at alpha = 0), so a product with one is no number a gate may multiply
    params: frozenset[str] = frozenset()
    # the forward's Max reductions, and the tensors it defines as an exp shifted by one of them
    # (a softmax's numerator exp(a - max a)): at most 1 where read, a product's first factors
    maxima: dict[str, frozenset[str]] = field(default_factory=dict)  # each with what it reads
    # the sums the op's text adds as one (Graph.sums): a sum holding one adds its terms first
    sums: tuple[sp.Expr, ...] = ()
    # each factor u of a log the text adds inside an exp (Graph.logs), under canonical index
    # names, with the tensors that exp reads besides: SymPy's ``u exp(a)`` is computed as the
    # text's ``exp(a + log(u))`` (derive.lower.logged)
    logged: dict[sp.Expr, list[frozenset[str]]] = field(default_factory=dict)
    shifted: set[str] = field(default_factory=set)
    # the tensors the forward defines as a function that overflows (exp, cosh: grows_fast)
    overflowing: set[str] = field(default_factory=set)
    # the names assigned so far that are exactly 0 where a where() or a step of theirs drops a
    # branch: name -> (its axes, the mask: a product of 0/1 gates, 0 where the name is 0),
    # for a later product that reads the name beside an overflow (see arithmetic._masked)
    zeros: dict[str, tuple[tuple[sp.Symbol, ...], sp.Expr]] = field(default_factory=dict)
    # the expressions whose lowering is under way, innermost last (see :meth:`value`)
    within: list[sp.Expr] = field(default_factory=list, repr=False)

    # -- lowering --------------------------------------------------------------------------
    def value(self, e: sp.Expr, order: list[sp.Symbol]) -> ir.Node:
        """``e`` lowered, its axes in ``order``'s order where the lowering is free to choose.

        Every free index of ``e`` is an axis of the result: a rule that dropped one would sum
        or broadcast over it silently (fuzz 1179: ``v`` of ``db[v + cls[h], d]`` lost), so a
        lost axis stops the lowering as an engine bug instead.

        An int tensor (:func:`lowers_to_int`) lowered as an operand of arithmetic whose value
        is not whole is cast to the op's dtype first: torch computes ``int64 / 3``, ``int64 *
        0.1``, ``exp(int64)`` and ``where(c, int64, 0.5)`` in its default dtype, float32,
        where the op runs in float64 (``exp(clamp(r + 3 t, 0, I - 1) / 3)``, a position a
        delta solved, was 1e-8 off). An int tensor meeting a float tensor is promoted exactly;
        whatever is lowered inside an index, a subscript or a comparison keeps its ints."""
        e = sp.sympify(e)
        self.within.append(e)
        try:
            v = self.verified(e, self.dispatch(self, e, order))
        finally:
            self.within.pop()
        if v.scalar or not self.within or not computes(parent := self.within[-1]):
            return v
        if not lowers_to_int(self, e) or lowers_to_int(self, parent) or self.in_index():
            return v
        return ir.Cast(v, self.like, axes=v.axes)

    def in_index(self) -> bool:
        """Whether what is lowered now is (part of) an index: it keeps its ints."""
        return any(f is INDEXING or isinstance(f, READS_INDICES) for f in self.within)

    @contextlib.contextmanager
    def indexing(self) -> Iterator[None]:
        """Lower an index (ints kept, nothing cast) outside the rule of what reads it."""
        self.within.append(INDEXING)
        try:
            yield
        finally:
            self.within.pop()

    def verified(self, e: sp.Expr, v: ir.Node) -> ir.Node:
        """``v``, the lowered ``e``, once checked to have an axis for each free index of ``e``."""
        lost = [s for s in _free_axes(self, e) if s not in v.axes]
        if lost and not v.scalar:  # an index in a subscript may cancel: x[f*G + g - G*(f + 3)]
            lost = [s for s in lost if s in _free_axes(self, _expanded_indices(e))]
        if lost and not v.scalar:
            raise EngineBug(self.op, f"lowering {e} lost its free index {sorted(map(str, lost))}")
        return v

    def spread(self, e: sp.Expr, v: ir.Node, order: list[sp.Symbol]) -> ir.Node:
        """``v``, lowered from a rewrite of ``e`` equal to it, expanded along the free indices
        of ``e`` the rewrite no longer reads: the value is constant along them. A gate's
        branches are simplified under its condition, ``where(c, 1, 0) H(where(c, A + x[b], B)
        - x[b])`` -> ``where(c, H(A), 0)``, and b is gone from an expression that had it (fuzz
        810585: refused as an engine bug by :meth:`verified`)."""
        lost = [s for s in _free_axes(self, e) if s not in v.axes]
        if not lost or v.scalar:
            return v
        axes = union([v.axes, tuple(lost)], order)
        shape = tuple(self.size(a) for a in axes)
        return ir.Expand(align(v, axes), shape, axes=axes)

    def emit(self, statement: ir.Statement) -> None:
        self.statements.append(statement)

    @property
    def like(self) -> ir.Ref:
        """The tensor whose dtype and device new tensors take."""
        return ir.Ref(self.device_of)

    def size(self, axis: sp.Symbol) -> ir.Node:
        """The range of ``axis``, as a python number."""
        return self.value(self.sizes[axis], [])

    def learn(self, ranges: Iterable[tuple[sp.Symbol, sp.Expr]], replace: bool = True) -> None:
        """Index ranges, for aranges and shapes (``replace=False``: only those not known)."""
        for axis, size in ranges:
            if replace or axis not in self.sizes:
                self.sizes[axis] = size

    def learn_limits(self, limits: Iterable[tuple]) -> None:
        """The ranges of a Sum's or a Max's bound indices."""
        self.learn((var, hi - lo + 1) for var, lo, hi in limits)

    def note_wrapping(self, labels: Iterable[str]) -> None:
        """Int tensors read by advanced indexing, which wraps a negative index silently: the
        module checks their range before every forward."""
        self.wrapping.update(labels)

    # -- names -----------------------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        """A new variable name: ``stem``, or ``stem_1``, ... when taken."""
        names = (stem if k == 0 else f"{stem}_{k}" for k in itertools.count())
        # never a name the function already holds: an input ``t_W`` is no temporary's to take
        name = next(n for n in names if n not in self.taken and n not in self.known)
        self.taken.add(name)
        return name

    def claim(self, name: str) -> None:
        """``name`` is the target's own: no temporary takes it."""
        self.taken.add(name)

    def tensor(self, label: str) -> ir.Node:
        """What a tensor name reads as: its alias's view, else the variable itself."""
        return self.aliases.get(label, ir.Ref(label))

    def alias(self, stem: str, view: ir.Node) -> str:
        """A name standing for ``view`` (read in place wherever the name is subscripted): the
        stem, or the stem numbered where a tensor of the op or another alias has it."""
        for k in itertools.count():
            name = stem if k == 0 else f"{stem}_{k}"
            if name not in self.known and self.aliases.get(name, view) == view:
                self.aliases[name] = view
                return name
        raise AssertionError("unreachable")

    # -- what is computed ------------------------------------------------------------------
    def recall(self, e: sp.Expr) -> ir.Node | None:
        """The tensor computed for ``e`` (under any names of its indices), on e's axes."""
        return recall(self.memo, e, self.sizes)

    def remember(self, e: sp.Expr, v: ir.Node) -> None:
        """Remember ``v`` as the value of ``e``: under any index names when its axes are
        exactly e's free indices, else (broadcast, or axes labelled by data) under e's own."""
        key, value = memo_entry(e, v, self.sizes)
        self.memo[key] = value

    def recall_call(self, e: sp.Expr) -> ir.Node | None:
        """The value bound for a call met more than once (``tanh_h``), if computed."""
        return recall(self.bound, e, self.sizes)

    def remember_call(self, e: sp.Expr, v: ir.Node) -> None:
        key, value = memo_entry(e, v, self.sizes)
        self.bound[key] = value

    def is_axis(self, i: sp.Expr) -> bool:
        return self.scope([]).is_axis(i)

    def scope(self, order: list[sp.Symbol]) -> Scope:
        """What a fusion's match may read: the names, the sums computed, the order wanted."""
        computed = Computed(self.memo, self.sizes)
        return Scope(
            self.scalars,
            computed,
            self.sizes.keys(),
            tuple(order),
            self.shared_sums,
            self.sizes,
            self.derived,
        )

    def permuted(self, v: ir.Node, order: list[sp.Symbol]) -> ir.Node:
        """``v`` with its axes in ``order``'s order (axes ``order`` lacks go last)."""
        return permute(v, tuple(sorted(v.axes, key=position(order))))
