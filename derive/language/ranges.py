"""Index ranges: each index's range, read off the tensor dimensions it subscripts, which gives
a ``Sum`` or ``Max`` of a definition its limits; and a ``Max`` inside an expression lifted
into a definition of its own, whose shape is its indices' ranges, so
that reverse mode needs one rule for Max.

In: parsed SymPy bodies (and the graph they join); out: ``Sum``/``ReduceMax`` nodes with
limits ``(i, 0, size - 1)``, and the extra definitions a lifted Max needs.
"""

from __future__ import annotations

import sympy as sp
from sympy.printing.str import StrPrinter

from derive.language.affine import affine_problem, declared_range, is_affine
from derive.language.graph import (
    Definition,
    Graph,
    LangError,
    ReduceMax,
    Tensor,
    View,
    may_be_infinite,
)


class _Written(StrPrinter):
    """SymPy's str with == and != as the language writes them (``Eq(y[n], c)`` in a message
    is SymPy's spelling, which the language refuses)."""

    def _print_Equality(self, e: sp.Eq) -> str:
        return f"{self._print(e.lhs)} == {self._print(e.rhs)}"

    def _print_Unequality(self, e: sp.Ne) -> str:
        return f"{self._print(e.lhs)} != {self._print(e.rhs)}"


def written(expr: sp.Basic, limit: int = 60) -> str:
    """``expr`` for a message: comparisons with their operators, cut at ``limit`` characters."""
    text = _Written().doprint(expr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def subscript_ranges(expr: sp.Expr) -> dict[sp.Symbol, set]:
    """Where each plain index is used as a tensor subscript: index -> {dimension sizes}."""
    ranges: dict[sp.Symbol, set] = {}
    for ind in expr.atoms(sp.Indexed):
        shape = ind.base.shape or ()
        if len(shape) != len(ind.indices):
            raise LangError(
                f"{ind} has {len(ind.indices)} indices but {ind.base} has {len(shape)} dimensions"
            )
        for pos, size in zip(ind.indices, shape, strict=True):
            if isinstance(pos, sp.Symbol) and pos.is_integer and pos.is_positive:
                # a size as a subscript, x[n, M], read past the axis's end (an IndexError)
                raise LangError(
                    f"subscript '{pos}' of {ind} is a size, not an index: the axis's last "
                    f"entry is {size} - 1"
                )
            if isinstance(pos, sp.Symbol):
                ranges.setdefault(pos, set()).add(size)
            elif pos.is_Integer:  # q = Wh[c, 0, h, d]: one slice; h[b, 0, c]: the first token
                if pos < 0:  # x[-1] is no last entry here: every gradient was 0
                    end = size + pos if size.is_Integer else f"{size} - {-pos}"
                    raise LangError(
                        f"constant subscript {pos} of {ind} is negative: an entry counted "
                        f"from the axis's end is written {end}"
                    )
                if size.is_Integer and pos >= size:
                    raise LangError(
                        f"constant subscript {pos} of {ind} is outside the axis's [0, {size})"
                    )
            elif pos.is_Number:
                raise LangError(f"subscript {float(pos):g} of {ind} is not a whole number")
            elif from_end(pos, size) is not None:  # h[b, T - 1, c]: the last token
                pass
            elif is_affine(pos):  # x[n, 2*t + k - P]: 0 outside the axis; gives no range
                problem = affine_problem(pos)
                if problem is not None:
                    raise LangError(f"subscript '{pos}' of {ind}: {problem}")
            elif not (isinstance(pos, sp.Indexed) and pos.base.is_integer):
                raise LangError(
                    f"subscript '{pos}' of {ind}: use an index, a constant (0, 1, ..., or "
                    f"{size} - 1 for the axis's last entry), an entry of an int64 tensor or an "
                    "affine subscript (2*t + k - P)"
                )
    return ranges


def from_end(pos: sp.Expr, size: sp.Expr) -> int | None:
    """k where the subscript ``pos`` is the axis's entry k from its end, ``size - k`` (k >= 1:
    ``T - 1`` is the last); None for any other subscript."""
    if size.is_Integer or not pos.free_symbols:
        return None
    k = sp.expand(size - pos)
    return int(k) if k.is_Integer and k >= 1 else None


def constant_reads(ind: sp.Indexed) -> list[tuple[sp.Expr, int, sp.Expr]]:
    """(size, entries, subscript) for each subscript of ``ind`` that reads one entry of an axis
    whose size is known only at run time, and how many entries the axis needs for it:
    ``h[b, 1, c]`` (S, 2, 1), ``h[b, S - 1, c]`` (S, 1, S - 1). The generated forward checks
    each axis is long enough (a fixed size is checked here, at parse time)."""
    shape = ind.base.shape or ()
    found = []
    for pos, size in zip(ind.indices, shape, strict=False):
        if size.is_Integer:
            continue
        if pos.is_Integer and pos >= 0:
            found.append((size, int(pos) + 1, pos))
        elif (back := from_end(pos, size)) is not None:
            found.append((size, back, pos))
    return found


def entries_read(steps: list) -> list[tuple[sp.Expr, int, sp.Indexed, sp.Expr]]:
    """(size, entries, read, subscript) for every :func:`constant_reads` subscript of every
    definition among ``steps``, in a fixed order: what the generated forward checks and the
    fuzzer's draw must leave room for."""
    found = []
    for step in steps:
        if not isinstance(step, Definition):
            continue
        for ind in sorted(step.body.atoms(sp.Indexed), key=sp.default_sort_key):
            found += [(size, need, ind, pos) for size, need, pos in constant_reads(ind)]
    return found


class Ranges(dict):
    """The ranges a definition is parsed with: the op's ``ranges=`` (``user``, what a message
    names) and those its text shows (:func:`derive.language.parse._written_ranges`)."""

    def __init__(self, written: dict, user: dict) -> None:
        super().__init__({**written, **user})
        self.user = user


def range_of(index: sp.Symbol, expr: sp.Expr, declared: dict | None = None) -> sp.Expr:
    sizes = subscript_ranges(expr).get(index)
    user = getattr(declared, "user", declared) or {}
    # declared (ranges=...), or known from the definition (a lifted call); a range read off
    # the text (Ranges) only where nothing in ``expr`` shows one: the text's reads of an
    # index may lie in another Sum that binds the same name over another axis (fuzz 7400043:
    # Sum(.. z[labels[p, aa], aa, k] .., aa) / Sum(.. hid[idx[b, p], aa] .., aa) was refused)
    size = declared_range(index, sizes or set(), user if sizes else declared or {})
    if size is not None:
        return size
    if not sizes:
        named = ", ".join(repr(k.name) for k in sorted(user, key=str))
        misspelt = f" (ranges names {named}, not '{index}')" if named else ""  # {'q': 'T'}
        shown = written(expr)
        raise LangError(
            f"cannot infer the range of index '{index}' in {shown}: it subscripts no tensor "
            f"there as a plain index; declare it in the op, ranges={{'{index}': '...'}} with "
            f"the size it runs over{misspelt}"
        )
    if len(sizes) > 1:
        shown = ", ".join(sorted(map(str, sizes)))
        raise LangError(f"index '{index}' is used over different sizes: {shown}")
    return next(iter(sizes))


def _limits(expr: sp.Expr, indices: tuple, declared: dict) -> list[tuple]:
    if not indices:
        raise LangError("Sum/Max need at least one index to reduce over")
    twice = next((i for k, i in enumerate(indices) if i in indices[:k]), None)
    if twice is not None:
        # Sum(x[n, m], m, m): SymPy sums the inner sum again over m (M times the sum), the
        # forward summed once (x.sum((1, 1)) raises): a typo either way
        raise LangError(f"a Sum/Max names index '{twice}' twice: each index it reduces over once")
    for i in indices:
        if isinstance(i, sp.IndexedBase):  # Sum(x[n], s) below a definition s[n] = ...
            raise LangError(f"'{i}' is both a tensor and the index of a Sum/Max: rename the index")
        if isinstance(i, sp.Number):  # Max(x[n], 0) meant maximum (found by probing)
            raise LangError(
                f"Sum/Max reduce over indices, not the number {i}: for the larger of two values "
                f"write maximum(value, {i}), for the smaller minimum(value, {i})"
            )
        if not isinstance(i, sp.Symbol):
            raise LangError(f"Sum/Max reduce over indices, not '{i}'")
        if i.is_positive or not i.is_integer:  # a size, or a param: Max(a, eps) meant maximum
            kind = "a size" if i.is_integer else "a param"
            raise LangError(
                f"Sum/Max reduce over an index, and '{i}' is {kind}: for the larger of two "
                f"values write maximum(value, {i}), for the smaller minimum(value, {i})"
            )
        if i not in expr.free_symbols and subscript_ranges(expr).get(i):
            # Sum(Sum(x[n, m], m), m): the inner sum binds m, so the outer one multiplied by M
            raise LangError(
                f"a Sum/Max over '{i}' of {written(expr, 200)}, in which '{i}' is already "
                "summed or maxed: rename one of the two indices"
            )
    return [(i, 0, range_of(i, expr, declared) - 1) for i in indices]


def lang_sum(expr: sp.Expr, *indices: sp.Symbol, declared: dict | None = None) -> sp.Expr:
    return sp.Sum(expr, *_limits(sp.sympify(expr), indices, declared or {}))


def lang_max(expr: sp.Expr, *indices: sp.Symbol, declared: dict | None = None) -> sp.Expr:
    return ReduceMax(expr, *_limits(sp.sympify(expr), indices, declared or {}))


class nested(sp.Function):  # noqa: N801
    """A maximum (minimum) an enclosing maximum (minimum) reads, kept apart until it is lifted
    into a definition of its own (:func:`lift_maxes`).

    SymPy flattens ``Max(Max(x, y), z)`` into ``Max(x, y, z)``, whose derivative in x is
    ``Heaviside(x - Max(y, z))``: 1/2 at a three-way tie for each argument, 3/2 in all, where
    any derivative of a maximum sums to 1 (``maximum(x + t, y + t, z + t)`` grows as t) and
    torch's nested maximums give 1/4, 1/4, 1/2 (found by probing: ``maximum(maximum(x, y),
    0)`` at x = y = 0). Lifted, each maximum has two arguments and its own 1/2 at a tie, as
    torch.maximum, in the nesting the user wrote."""

    @classmethod
    def eval(cls, arg: sp.Expr) -> None:
        return None

    def _eval_is_real(self) -> bool | None:
        return self.args[0].is_real

    def _eval_is_extended_real(self) -> bool | None:
        return self.args[0].is_extended_real


def kept_nested(make, kind: type) -> object:
    """``make`` (sp.Max or sp.Min) with each argument that is itself a ``kind`` kept apart as
    :class:`nested`, so that SymPy does not flatten it (see there)."""

    def call(*args: sp.Expr) -> sp.Expr:
        return make(*[nested(a) if isinstance(a, kind) else a for a in args])

    return call


def lift_maxes(step: Definition | View, g: Graph, sizes: set) -> list[Definition | View]:
    """A Max inside an expression becomes a definition of its own, and so does a maximum
    (minimum) another one reads (:class:`nested`).

    ``h[n] = exp(Max(x[n, c], c))`` -> ``h_max0[n] = Max(x[n, c], c)``, ``h[n] = exp(h_max0[n])``.
    Reverse mode then needs one rule: a definition that is one Max. A Max over several indices
    stays whole (``m = Max(x[p, v], p, v)``), its argmax one int in mixed radix
    (:mod:`derive.language.argmax`): a pool's forward is then one reduction, not two, and its
    backward one scatter at ``S*i*W + S*j + a``. ``maximum(maximum(x[n], y[n]), 0)`` ->
    ``out_max0[n] = Max(x[n], y[n])``, ``out[n] = Max(0, out_max0[n])``; a nested maximum of
    params alone (no derivative to take) is flattened as SymPy would.
    """
    if not isinstance(step, Definition) or not step.body.has(ReduceMax, nested):
        return [step]
    lifted: list[Definition] = []

    def aux(node: ReduceMax) -> sp.Expr:
        # the definition's own axis order first (a pool's m_max0[n, c, i, j, p] is stored as
        # x is, its Max's view then read in place), the other indices after, by name
        outer = {i: k for k, i in enumerate(step.indices)}
        free = tuple(
            sorted(
                (x for x in node.free_symbols if isinstance(x, sp.Symbol) and x.is_integer),
                key=lambda i: (outer.get(i, len(outer)), str(i)),
            )
        )
        free = tuple(
            i
            for i in free
            if i not in sizes and not any(i == ind.base.label for ind in node.atoms(sp.Indexed))
        )
        return define(node, free, "max")  # over every index: a 0-d definition

    def define(node: sp.Expr, free: tuple, kind: str) -> sp.Expr:
        for d in lifted:  # the same one read twice is one definition
            if d.body == node and d.indices == free:
                t = g.tensors[d.name]
                return t.base[free] if free else t.whole
        name = f"{step.name}_{kind}{len(lifted)}"
        dims = tuple(range_of(i, node, g.ranges) for i in free)
        g.tensors[name] = Tensor(name, dims, unbounded=may_be_infinite(node, g.tensors))
        lifted.append(Definition(name, free, node, f"{name}[...] = {node}  (from `{step.text}`)"))
        return g.tensors[name].base[free] if free else g.tensors[name].whole

    def apart(node: sp.Expr) -> sp.Expr:
        """A nested maximum or minimum as a definition of its own, over its free indices."""
        if not node.atoms(sp.Indexed) and not any(
            x.name in g.tensors for x in node.free_symbols if isinstance(x, sp.Symbol)
        ):
            return node  # params alone: nothing is differentiated
        order = {i: k for k, i in enumerate(step.indices)}  # the definition's axes first
        free = sorted(
            (
                i
                for i in node.free_symbols
                if isinstance(i, sp.Symbol) and i.is_integer and i not in sizes
                if not any(i == ind.base.label for ind in node.atoms(sp.Indexed))
            ),
            key=lambda i: (order.get(i, len(order)), str(i)),
        )
        return define(node, tuple(free), "max" if isinstance(node, sp.Max) else "min")

    def lift(e: sp.Basic, top: bool) -> sp.Basic:
        if not isinstance(e, sp.Basic) or not e.args:
            return e
        if isinstance(e, ReduceMax):  # over all its indices at once: one argmax (.argmax)
            node = ReduceMax(lift(e.function, False), *e.limits)
            return node if top else aux(node)
        if isinstance(e, nested):
            return apart(lift(e.args[0], False))
        return e.func(*[lift(a, False) for a in e.args])

    body = lift(step.body, True)
    return [*lifted, Definition(step.name, step.indices, body, step.text)]
