"""Fusions: where two torch kernels can be one, the lowering emits one.

Each rule is a method of :class:`Fusions`, mixed into :class:`~derive.lower.lowerer.Lowerer`
(it uses the lowerer's ``value``, ``memo``, ``sizes`` and ``lines``); each returns ``None``
when it does not apply, and the plain lowering goes on. The identities, with what they save:

- ``b[m] + sum_k x[n, k] W[k, m]`` -> ``torch.addmm(b, x, W)``: the bias rides in the matmul
- ``r + c * a * b`` -> ``torch.addcmul(r, a, b, value=c)``: one pass over the tensor, not two
- ``(c + a) * g`` -> ``c * g + a * g`` when that becomes an addcmul
- ``Sum(x[n, m], n) / N`` -> ``x.mean(0)``: one kernel, not two
- ``g * probs / N`` -> ``g / N * probs``: small factors first, numbers folded into one operation
- ``x[n, t[n]] += v[n]`` -> ``x.scatter_add_(1, t[:, None], v[:, None])``: one kernel, not three
"""

from __future__ import annotations

import sympy as sp

from derive.lower.reductions import contraction
from derive.lower.value import (
    ATOM,
    MUL,
    POW,
    Value,
    align,
    memo_key,
    natural_order,
    number,
    union,
)


class Fusions:
    """The fusing rules of the lowering (a mixin of :class:`derive.lower.lowerer.Lowerer`)."""

    def _addcmul(self, e: sp.Add, order: list[sp.Symbol]) -> Value | None:
        """r + c * a * b -> torch.addcmul(r, a, b, value=c): one pass instead of two."""
        best = None
        for term in e.args:
            coef, rest = term.as_coeff_Mul()
            factors = sp.Mul.make_args(rest)
            values = [self.value(f, order) for f in factors]
            if len(factors) < 2 or any(v.scalar for v in values[-1:]):
                continue
            big = max(
                range(len(factors)), key=lambda k: (len(values[k].axes), not values[k].scalar)
            )
            if values[big].scalar or (factors[big].is_Pow and factors[big].exp.is_negative):
                continue  # addcmul multiplies two tensors
            key = (len(values[big].axes), coef != 1)  # the biggest pass; absorb a coefficient
            if best is None or key > best[0]:
                small = sp.Mul(*factors[:big], *factors[big + 1 :])
                best = (key, term, coef, small, values[big])
        if best is None:
            return None
        _, term, coef, small, big = best
        r, a = self.value(e - term, order), self.value(small, order)
        if r.scalar or a.scalar:
            return None
        axes = union([r.axes, a.axes, big.axes], order)
        value = "" if coef == 1 else f", value={number(coef)}"
        args = ", ".join(align(v, axes).code for v in (r, a, big))
        return Value(f"torch.addcmul({args}{value})", axes)

    def _addmm(self, e: sp.Add, order: list[sp.Symbol]) -> Value | None:
        """b[m] + sum_k x[n, k] W[k, m] -> torch.addmm(b, x, W): the bias rides in the matmul."""
        sums = [t for t in e.args if isinstance(t, sp.Sum) and memo_key(t) not in self.memo]
        if len(sums) != 1:
            return None
        bound = [lim[0] for lim in sums[0].limits]
        self.sizes.update({var: hi - lo + 1 for var, lo, hi in sums[0].limits})
        mm = contraction(self, sums[0].function, bound, order)
        if mm is None or mm.operands is None:
            return None
        rest = self.value(e - sums[0], order)
        if rest.scalar or not set(rest.axes) <= set(mm.axes):
            return None
        left, right = mm.operands
        return Value(f"torch.addmm({align(rest, mm.axes).code}, {left}, {right})", mm.axes)

    def _product(
        self, num: list[Value], den: list[Value], order: list[sp.Symbol], scale: str | None
    ) -> Value:
        """Multiply the small factors first: each full-size product is a pass over the tensor.

        ``g * probs / N`` becomes ``g / N * probs``, ``bnraw * s / (N - 1)`` becomes
        ``s / (N - 1) * bnraw``; python numbers (``scale``, sign included) are folded into one
        and applied to the smallest tensor factor.
        """
        rank = lambda v: len(v.axes)  # noqa: E731
        acc: Value | None = None
        for level in sorted({rank(v) for v in num + den}):
            parts = ([acc] if acc else []) + [v for v in num if rank(v) == level]
            below = [v for v in den if rank(v) == level]
            if len(parts) == 1 and not below and (scale is None or acc is not None):
                acc = parts[0]
                continue
            axes = union([v.axes for v in parts + below], order)
            if not parts and len(below) == 1 and scale is None and not below[0].scalar:
                acc = Value(f"torch.reciprocal({below[0].code})", below[0].axes)
                continue
            code = " * ".join(align(v, axes).wrap(MUL) for v in parts) or "1"
            for d in below:
                code += f" / {align(d, axes).wrap(POW)}"
            if scale is not None and acc is None:
                code += scale
            scalar = all(v.scalar for v in parts + below)
            acc = Value(code, axes, MUL, scalar)
        return acc if acc else Value("1", scalar=True)

    def _mean(self, e: sp.Mul, order: list[sp.Symbol]) -> Value | None:
        """Sum(x[n, m], n) / N -> x.mean(0) when N is the summed extent: one kernel, not two."""
        sums = [f for f in e.args if isinstance(f, sp.Sum)]
        if len(sums) != 1 or memo_key(sums[0]) in self.memo:
            return None  # a sum computed already is reused, not recomputed as a mean
        bound = [lim[0] for lim in sums[0].limits]
        extent = sp.Mul(*[hi - lo + 1 for _, lo, hi in sums[0].limits])
        inner = natural_order(sums[0].function, order)
        rest = sp.Mul(*[f for f in e.args if f is not sums[0]])
        if sp.expand(rest * extent) != 1:  # the factor beside the sum is 1/extent
            return None
        self.sizes.update({var: hi - lo + 1 for var, lo, hi in sums[0].limits})
        if contraction(self, sums[0].function, bound, inner) is not None:
            return None
        body = self.value(sums[0].function, inner)
        if not set(bound) <= set(body.axes):
            return None
        dims = ", ".join(str(body.axes.index(b)) for b in bound)
        code = f"{body.wrap(ATOM)}.mean({'(' + dims + ')' if len(bound) > 1 else dims})"
        return self._permuted(Value(code, tuple(a for a in body.axes if a not in bound)), order)

    def _distribute(self, e: sp.Mul, order: list[sp.Symbol]) -> Value | None:
        """(c + a) * g -> c * g + a * g when that fuses: ``torch.addcmul(g, a, g, value=c)``."""
        adds = [f for f in e.args if isinstance(f, sp.Add)]
        if len(adds) != 1 or len(adds[0].args) != 2 or not adds[0].args[0].is_Number:
            return None
        other = e / adds[0]
        if self.value(other, order).scalar or self.value(adds[0], order).scalar:
            return None
        c, a = adds[0].args
        return self._addcmul(sp.Add(c * other, a * other, evaluate=False), order)

    def _scatter_pick(self, name: str, coef: sp.Expr, axis, data: sp.Indexed, axes: tuple) -> bool:
        """x[n, t[n]] += v[n] as one ``scatter_add_`` (indexing with ``-=`` is three kernels)."""
        others = tuple(a for a in axes if a != axis)
        pick, value = self.value(data, list(others)), self.value(coef, list(others))
        if pick.axes != others or value.scalar or value.axes not in (others, ()):
            return False
        pos = axes.index(axis)
        if value.axes:
            src = f"{value.wrap(ATOM)}.unsqueeze({pos})"
        else:  # one number for every row: a broadcast view, nothing copied
            shape = [self._size(a) for a in others]
            src = f"{value.wrap(ATOM)}.expand({', '.join(shape[:pos] + ['1'] + shape[pos:])})"
        index = f"{pick.wrap(ATOM)}.unsqueeze({pos})"
        self.lines.append(f"{name}.scatter_add_({pos}, {index}, {src})")
        return True
