"""One definition's tangent: forward mode's rule for a body, shared by the tangent map
(:mod:`derive.symbolic.forward_mode`) and the proof that an output does not see a maximum's
shift (:mod:`derive.symbolic.shifts`).

A body ``f(..., v[K], ...)`` has the tangent ``sum over its reads v[K]: d f / d v[K] * t_v[K]``;
a Sum's is the Sum of its body's, a Max's its body's at the argmax.
"""

from __future__ import annotations

import sympy as sp

from derive.language import ReduceMax, Tensor
from derive.language.argmax import picks
from derive.symbolic.indices import symbol_atoms, top_indexed, top_reductions
from derive.symbolic.reverse import partial, sums_of_squares


def read(t: Tensor, indices: tuple) -> sp.Expr:
    """``t`` at ``indices``; a 0-d tensor's whole symbol."""
    return t.base[indices] if t.dims else t.whole


class Tangent:
    """t(expr): the tangent of one body, given the tangents of the tensors it reads."""

    def __init__(
        self,
        op: str,
        text: str,
        tangents: dict[str, Tensor],
        pick: sp.Expr | None,
        squares: frozenset[str] = frozenset(),
    ):
        self.op, self.text, self.tangents, self.pick = op, text, tangents, pick
        self.squares = squares  # tensors defined as sums of squares (reverse.square_tensors)

    def __call__(self, expr: sp.Expr) -> sp.Expr:
        if isinstance(expr, sp.Sum):
            return sp.Sum(self(expr.function), *expr.limits)
        if isinstance(expr, ReduceMax):  # the whole right-hand side (checked by reverse mode)
            at = picks(expr, self.pick)  # one delta per index: its digit of the argmax
            deltas = sp.Mul(*[sp.KroneckerDelta(lim[0], c) for lim, c in zip(expr.limits, at)])
            return sp.Sum(deltas * self(expr.function), *expr.limits)
        reads: list[sp.Expr] = [i for i in top_indexed(expr) if i.base.label.name in self.tangents]
        reads += [s for s in symbol_atoms(expr) if self._whole(s)]
        reads += [r for r in top_reductions(expr) if self._varies(r)]
        slots = {r: sp.Symbol(f"_slot{k}", real=True) for k, r in enumerate(reads)}
        flat, back = expr.xreplace(slots), {s: r for r, s in slots.items()}
        total = sp.S.Zero
        squares = sums_of_squares(slots, flat, self.squares)
        for original, slot in slots.items():
            local = partial(flat, slot, self.op, self.text, squares)
            total += local.xreplace(back) * self._inner(original)
        return total

    def _whole(self, s: sp.Symbol) -> bool:
        """A 0-d float tensor read whole (an index is an integer symbol, never a read)."""
        t = self.tangents.get(s.name)
        return t is not None and not t.dims and not s.is_integer

    def _varies(self, e: sp.Expr) -> bool:
        names = {i.base.label.name for i in e.atoms(sp.Indexed)}
        return bool(names & set(self.tangents)) or any(map(self._whole, e.atoms(sp.Symbol)))

    def _inner(self, original: sp.Expr) -> sp.Expr:
        if isinstance(original, sp.Indexed):
            return read(self.tangents[original.base.label.name], original.indices)
        if isinstance(original, sp.Symbol):
            return self.tangents[original.name].whole
        return self(original)  # a Sum nested in the body: its own tangent
