"""Selections in the lowering: where(), index comparisons, constant subscripts and their stacks.

A mixin of :class:`derive.lower.lowerer.Lowerer` (it uses the lowerer's ``value``, ``sizes``,
``known``, ``aliases`` and ``lines``). The identities, with what they emit:

- ``t2 <= t1`` -> ``torch.arange(T) <= torch.arange(T)[:, None]``: a broadcast boolean over
  the two index axes (the causal mask, a T x T bool), never a float one-hot
- ``where(c, a, b)`` -> ``torch.where(c, a, b)``; ``where(c, a, 0)`` with a a number ->
  ``c.to(dtype) * a``; ``-inf`` -> ``float("-inf")``
- ``W[c, 1, h, d]`` -> ``W[:, 1]``: a constant subscript is a slice (a view, nothing copied),
  so the slice takes part in matmul/einsum like any tensor
- ``delta(i, 0) A + delta(i, 1) B + delta(i, 2) C`` -> ``torch.stack([A, B, C], pos)``: the
  adjoint of three constant subscripts along one axis, never three masked full-size temporaries
"""

from __future__ import annotations

import itertools

import sympy as sp

from derive.functions import where
from derive.lower.indexing import index_value, materialise
from derive.lower.value import ADD, ATOM, COMPARE, MUL, Value, align, union
from derive.symbolic.simplify import expanded_terms

RELATIONS = {
    sp.Equality: "==",
    sp.Unequality: "!=",
    sp.LessThan: "<=",
    sp.StrictLessThan: "<",
    sp.GreaterThan: ">=",
    sp.StrictGreaterThan: ">",
}


def is_sliced(e: sp.Basic) -> bool:
    """An Indexed with a constant subscript (``W[c, 1, h, d]``)."""
    return isinstance(e, sp.Indexed) and any(i.is_Integer for i in e.indices)


def _guard_of(cond: sp.Basic) -> sp.Indexed | None:
    """X[i] in ``X[i] >= 0`` (or ``X[i] > -1``): a guard that an int entry is an index."""
    if isinstance(cond, sp.GreaterThan) and cond.rhs == 0 and isinstance(cond.lhs, sp.Indexed):
        return cond.lhs
    if (
        isinstance(cond, sp.StrictGreaterThan)
        and cond.rhs == -1
        and isinstance(cond.lhs, sp.Indexed)
    ):
        return cond.lhs
    return None


def guarded_data(g) -> set[str]:
    """Int inputs whose every use as a subscript sits in where(X[i] >= 0, ..X[i].., b): a
    negative entry there marks a position to ignore (cross-entropy's ignore_index = -1), so it
    is read as index 0 (any in range; the where discards it) and not refused as out of range."""
    if getattr(g, "guarded", None) is not None:
        return set(g.guarded)
    guarded, unguarded = set(), set()

    def walk(e: sp.Basic, guards: frozenset) -> None:
        if isinstance(e, where):
            guard = _guard_of(e.args[0])
            walk(e.args[0], guards)
            walk(e.args[1], guards | ({guard} if guard is not None else set()))
            walk(e.args[2], guards)
            return
        if isinstance(e, (sp.Indexed, sp.KroneckerDelta)):
            subs = e.indices if isinstance(e, sp.Indexed) else e.args
            for sub in subs:
                if isinstance(sub, sp.Indexed):
                    (guarded if sub in guards else unguarded).add(sub.base.label.name)
        for a in e.args:
            walk(a, guards)

    for step in g.steps:
        if hasattr(step, "body"):
            walk(step.body, frozenset())
    return guarded - unguarded


class Selections:
    """The selection rules of the lowering (a mixin of :class:`derive.lower.lowerer.Lowerer`)."""

    def safe_indices(self, expr: sp.Expr) -> sp.Expr:
        """A guarded int input (:func:`guarded_data`) used as a subscript is read clamped to
        0 and up: its negative entries, ignored by their where(), index nothing out of range.
        In the backward the ignored positions' coefficients are where(X >= 0, ..., 0) = 0, so
        the scatter into index 0 adds nothing."""
        replace = {}
        for ind in expr.atoms(sp.Indexed, sp.KroneckerDelta):
            subs = ind.indices if isinstance(ind, sp.Indexed) else ind.args
            for sub in subs:
                if isinstance(sub, sp.Indexed) and sub.base.label.name in self.guarded:
                    label = sub.base.label.name
                    name = self._alias(f"{label}_index", f"{self._code(label)}.clamp(min=0)")
                    base = sp.IndexedBase(name, shape=sub.base.shape, integer=True)
                    replace[sub] = base[sub.indices]
        if not replace:
            return expr

        # only the subscripts, nested ones too (x[ids[pos[i]]], as inlining writes a pick of a
        # pick): the where() conditions keep reading the data itself
        def sub(i: sp.Expr) -> sp.Expr:
            return replace[i] if i in replace else walk(i)

        def walk(e: sp.Basic) -> sp.Basic:
            if isinstance(e, sp.Indexed):
                return e.func(e.base, *[sub(i) for i in e.indices])
            if isinstance(e, sp.KroneckerDelta):
                return sp.KroneckerDelta(*[sub(a) for a in e.args])
            if not e.args or isinstance(e, sp.core.relational.Relational):
                return e
            return e.func(*[walk(a) for a in e.args])

        return walk(expr)

    def slice_constants(self, expr: sp.Expr) -> sp.Expr:
        """Every ``W[c, 1, h, d]`` in ``expr`` as a plain tensor ``W[:, 1]`` over (c, h, d)."""
        replace = {}
        for ind in expr.atoms(sp.Indexed):
            whole = all(i.is_Integer for i in ind.indices)
            if not is_sliced(ind) or (whole and ind.base.is_integer):
                continue  # an int entry, t[0], stays a data subscript read where it is used
            label = ind.base.label.name
            keep = [k for k, i in enumerate(ind.indices) if not i.is_Integer]
            parts = [str(int(i)) if i.is_Integer else ":" for i in ind.indices]
            while parts and parts[-1] == ":":
                parts.pop()
            stem = f"{label}_at_{'_'.join(p if p != ':' else 'all' for p in parts)}"
            name = self._alias(stem, f"{self._code(label)}[{', '.join(parts)}]")
            if whole:  # W[1, 2]: one entry, a 0-d tensor read in place (Lowerer._symbol)
                replace[ind] = sp.Symbol(name, real=True)
                continue
            shape = tuple(ind.base.shape[k] for k in keep)
            base = sp.IndexedBase(name, shape=shape, **_kind(ind.base))
            replace[ind] = base[tuple(ind.indices[k] for k in keep)]
        return expr.xreplace(replace) if replace else expr

    def _code(self, label: str) -> str:
        """The code a tensor name reads as: its alias's, else the name itself."""
        return self.aliases.get(label, label)

    def _alias(self, stem: str, code: str) -> str:
        """A name standing for ``code`` (read in place wherever the name is subscripted): the
        stem, or the stem numbered where a tensor of the op or another alias has it."""
        for k in itertools.count():
            name = stem if k == 0 else f"{stem}_{k}"
            if name not in self.known and self.aliases.get(name, code) == code:
                self.aliases[name] = code
                return name
        raise AssertionError("unreachable")

    def _relation(self, e: sp.core.relational.Relational, order: list[sp.Symbol]) -> Value:
        """An index (or int data) comparison: a broadcast boolean over the axes it reads."""
        op = RELATIONS.get(type(e))
        if op is None:
            raise ValueError(f"unsupported comparison {e}")
        a, b = (index_value(self, x, order) for x in e.args)
        axes = union([a.axes, b.axes], order)
        left, right = (align(v, axes).wrap(MUL) for v in (a, b))
        return Value(f"{left} {op} {right}", axes, COMPARE, a.scalar and b.scalar)

    def _where(self, e: where, order: list[sp.Symbol]) -> Value:
        cond = self._relation(e.args[0], order)
        a, b = (self._branch(x, order) for x in e.args[1:])
        if cond.scalar:  # params and numbers only (alpha <= 0): a python bool, known per call
            if a.scalar and b.scalar:
                return Value(f"({a.code} if {cond.code} else {b.code})", (), scalar=True)
            here = f"device={self.device_of}.device"  # torch.where takes no python bool
            cond = Value(f"torch.tensor({cond.code}, {here})", ())
        if a.scalar and b.scalar:  # an indicator: the mask as the float dtype, c (a - b) + b
            mask = f"{cond.wrap(ATOM)}.to({self.device_of}.dtype)"
            scale = self.value(e.args[1] - e.args[2], [])
            code = mask if scale.code == "1" else f"{mask} * {scale.wrap(MUL + 1)}"
            if b.code == "0":
                return Value(code, cond.axes, MUL)
            return Value(f"{code} + {b.wrap(ADD + 1)}", cond.axes, ADD)
        axes = union([cond.axes, a.axes, b.axes], order)
        args = ", ".join(align(v, axes).code for v in (cond, a, b))
        return Value(f"torch.where({args})", axes)

    def _branch(self, x: sp.Expr, order: list[sp.Symbol]) -> Value:
        if x in (sp.oo, -sp.oo):
            return Value(f'float("{"-" if x == -sp.oo else ""}inf")', scalar=True)
        return self.value(x, order)

    def _stack(self, name: str, expr: sp.Expr, axes: tuple) -> bool:
        """``name = sum_k delta(i, k) A_k`` over constants k: one stack (or slices set)."""
        picks: dict[int, sp.Expr] = {}
        axis = None
        terms = sp.Add.make_args(expr)
        if any(len(t.atoms(sp.KroneckerDelta)) > 1 for t in terms) and expanded_terms(expr) <= 16:
            terms = sp.Add.make_args(sp.expand_mul(expr))  # g (delta(i, 1) a + delta(i, 2) b)
        for term in terms:
            deltas = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.KroneckerDelta)]
            if len(deltas) != 1:
                return False
            (d,) = deltas
            ax = next((x for x in d.args if x in axes), None)
            const = next((x for x in d.args if x.is_Integer), None)
            if ax is None or const is None or (axis is not None and ax != axis):
                return False
            axis, k = ax, int(const)
            # coef(i) delta(i, k) = coef(k) delta(i, k): the slice reads coef at i = k
            picks[k] = picks.get(k, sp.S.Zero) + (term / d).xreplace({ax: const})
        size = self.sizes.get(axis) if axis is not None else None
        if size is None or not size.is_Integer or not set(picks) <= set(range(int(size))):
            return False
        others, pos = tuple(a for a in axes if a != axis), axes.index(axis)
        parts = []
        for k in range(int(size)):
            coef = self.safe_indices(self.slice_constants(picks.get(k, sp.S.Zero)))
            value = self._checked(coef, others, name) if coef != 0 else Value("0", scalar=True)
            parts.append(materialise(self, value, others, fresh=False))
        self.lines.append(f"{name} = torch.stack([{', '.join(parts)}], {pos})")
        return True


def _kind(base: sp.IndexedBase) -> dict:
    return {"integer": True} if base.is_integer else {"real": True}
