"""A log of a sum of exps, shifted by its maximum: ``log(Sum(exp(e), k))`` is
``M + log(Sum(exp(e - M), k))`` with ``M = Max(e, k)``.

A user writes cross-entropy as ``log(Sum(exp(x[n, k]), k)) - x[n, y[n]]``: exp overflows at
logits past 709 (88 in float32), so the loss is inf and its gradient NaN where F.cross_entropy
is finite (found by probing). Shifted, every exp is at most 1 and the sum at least 1, so the
log is finite wherever the logits are. The identity holds for every finite e; the shift's own
derivative, ``dM (1 - Sum(exp(e - M)) / Sum(exp(e - M)))``, is 0, and reverse mode's
max-subtraction rule collapses it, so the backward is the same softmax as before, only
finite. The Max is lifted into a definition of its own as any Max inside an expression is
(:func:`~derive.language.ranges.lift_maxes`).

The rule declines where it would add work or change a value:

- ``e`` may be -inf (a masked score, ``where(j <= i, s, -inf)``): a row masked whole has
  M = -inf and ``e - M`` NaN, where the written form is log(0) = -inf;
- ``e`` is already shifted: it reads a maximum (a Max of its own, or a definition that is
  one, as the catalogue's logsumexp and cross-entropy write ``x[n, k] - m[n]``);
- the sum's body is anything but one exp (a weighted sum, a masked one).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import sympy as sp

from derive.language.graph import ReduceMax, Tensor, may_be_infinite
from derive.symbolic.indices import bound_indices, rename_bound


def shifted_logsumexps(
    body: sp.Expr, tensors: Mapping[str, Tensor], maxima: Collection[str]
) -> sp.Expr:
    """``body`` with each ``log(Sum(exp(e), limits))`` it may shift so (see the module
    docstring); ``maxima``: the definitions that are one Max."""

    def shifted(node: sp.Basic) -> sp.Basic:
        if not (isinstance(node, sp.log) and isinstance(node.args[0], sp.Sum)):
            return node
        total = node.args[0]
        if not isinstance(total.function, sp.exp):
            return node
        e = total.function.args[0]
        if may_be_infinite(e, tensors) or _reads_a_maximum(e, maxima):
            return node
        taken = {s.name for s in body.free_symbols | bound_indices(body)}

        def namer(limits: tuple, depth: int, scope: frozenset[str]) -> list[sp.Symbol]:
            out = []
            for k, *_ in limits:
                name = f"{k.name}_max"
                while name in taken or name in scope:
                    name += "_"
                taken.add(name)
                out.append(sp.Symbol(name, **k.assumptions0))
            return out

        apart = rename_bound(total, namer, taken)  # the Max's own indices, as the sum's
        m = ReduceMax(apart.function.args[0], *apart.limits)
        return m + sp.log(sp.Sum(sp.exp(e - m), *total.limits))

    return body.replace(lambda n: isinstance(n, sp.log), shifted)


def _reads_a_maximum(e: sp.Expr, maxima: Collection[str]) -> bool:
    read = {i.base.label.name for i in e.atoms(sp.Indexed)} | {s.name for s in e.free_symbols}
    return e.has(ReduceMax) or bool(read & set(maxima))
