"""The double backward's missing cotangents: a term only they reach is dropped, not zeroed.

Autograd calls a double backward with None for the cotangent of a first-order gradient that
nothing downstream reads: a gradient penalty on x alone (p's gradient is no part of it), an
input that requires no grad. The derived double backward is one function of every cotangent,

    pair = sum_k <v_k, b_k>        (b_k: the first backward's gradient of input k),

and a missing v_k read as zeros multiplies its whole chain by 0. Where a partial on that chain
is not finite, 0 * inf = NaN, where autograd, which never builds the paths of an undefined
gradient, has a number: GeM pooling at a fixed p over a row that a relu zeroed (its dp is NaN
there, as torch's is) gave a gradient penalty's Hessian in x of NaN on that row.

The double backward is linear in the cotangents, so every adjoint of the second-order op is a
sum of terms, each reached from some of them. The cotangents a value is reached from, its
*seeds*, follow by dataflow over the stepwise adjoints (consumers first):

    seeds(v_k) = {k},    seeds(d_t) = union of the seeds of the names d_t's definition reads.

A value reached from several seeds mixes them only where terms are added (a sum, or a
where()'s two branches); products and reductions carry one seeded factor by linearity. So in
every sum whose terms' seeds differ, a term whose seeds are fewer than the sum's is read only
where one of its own is present, ``given(term, k, ..)``, lowered to the python conditional
``(term if present[k] or .. else zeros)``: the missing chain never enters a value a present one
reaches, by induction over the adjoints in order. A returned gradient whose seeds are not all
cotangents is given the same way, or a missing chain is returned as its gradient. With every
cotangent present (a Hessian-vector product), the code computes what it computed before.

Forward mode is the same map the other way (:func:`gated_tangents`): the tangent map is linear
in the inputs' tangents, and torch hands ``jvp`` None for an input that carries none (a mask, a
constant of ``torch.func.jvp`` or ``hessian``). Read as zeros, its partial multiplied them:
``x sqrt(y)``'s tangent along x alone was ``t_x sqrt(y) + 0 x / (2 sqrt(y))``, NaN at y = 0
where torch's is 0 (found by probing). Its terms are given on the tangents that reach them.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy as sp

from derive.functions import where
from derive.language import Definition, View


class given(sp.Function):  # noqa: N801  (SymPy's naming, as where's)
    """given(term, k1, k2, ..) = term where one of the cotangents k1, k2, .. is present, else 0.

    Not a function an op writes: :func:`gated` makes it, in the double backward alone, and the
    lowering reads the flags from the backward's ``present`` (one per cotangent)."""

    @classmethod
    def eval(cls, term, *on):
        if term == 0:
            return sp.S.Zero
        return None

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(int(k) for k in self.args[1:])

    def _latex(self, printer, exp: str | None = None) -> str:
        return printer._print(self.args[0])

    def _sympystr(self, printer) -> str:
        return printer._print(self.args[0])


def gated(
    order: list[str],
    final: Mapping[str, sp.Expr],
    names: Mapping[str, str],
    views: Mapping[str, tuple[str, str]],
    cotangents: Mapping[str, int],
    returned: list[str],
) -> tuple[dict[str, sp.Expr], bool]:
    """``final`` (tensor -> its adjoint, ``order`` consumers first; ``names``: tensor -> its
    adjoint's name; ``views``: a reverse view's name -> (the adjoint it reshapes, its source))
    with every term a missing cotangent alone reaches given on its seeds; ``cotangents``: each
    cotangent input's name -> its position in ``present``; ``returned``: the tensors whose
    adjoints the backward returns. Also whether anything was given (one cotangent: never)."""
    every = frozenset(cotangents.values())
    seeds: dict[str, frozenset[int]] = {n: frozenset({k}) for n, k in cotangents.items()}
    out: dict[str, sp.Expr] = {}
    changed = False
    for t in order:
        e = final[t]
        body = _gate(e, seeds) if len(every) > 1 else e
        own = _seeds(e, seeds)
        if t in returned and own and own != every:
            body = given(body, *sorted(own))
        changed |= body.has(given)
        out[t] = body
        seeds[names[t]] = own
        for view, (dname, _) in views.items():
            if dname == names[t]:
                seeds[view] = own
    return out, changed


def gated_tangents(
    steps: list[Definition | View], tangents: Mapping[str, int], returned: str
) -> tuple[list[Definition | View], bool]:
    """Forward mode's tangent ``steps`` (in forward order; ``tangents``: each input tangent's
    name -> its position in ``present``; ``returned``: the output's tangent) with every term
    that some input tangents alone reach given on them, as :func:`gated` does for cotangents;
    and whether anything was given (one input tangent: never)."""
    every = frozenset(tangents.values())
    seeds: dict[str, frozenset[int]] = {n: frozenset({k}) for n, k in tangents.items()}
    out: list[Definition | View] = []
    changed = False
    for step in steps:
        if isinstance(step, View):
            seeds[step.name] = seeds.get(step.source, frozenset())
            out.append(step)
            continue
        own = _seeds(step.body, seeds)
        body = _gate(step.body, seeds) if len(every) > 1 else step.body
        if step.name == returned and own and own != every:
            body = given(body, *sorted(own))
        seeds[step.name] = own
        if body != step.body:
            changed = True
            step = Definition(step.name, step.indices, body, step.text)
        out.append(step)
    return out, changed


def _seeds(e: sp.Basic, seeds: Mapping[str, frozenset[int]]) -> frozenset[int]:
    """The cotangents ``e`` is reached from: those of the tensors and adjoints it reads."""
    found: frozenset[int] = frozenset()
    for s in e.atoms(sp.Symbol, sp.IndexedBase):
        name = s.label.name if isinstance(s, sp.IndexedBase) else s.name
        found |= seeds.get(name, frozenset())
    return found


def _gate(e: sp.Expr, seeds: Mapping[str, frozenset[int]]) -> sp.Expr:
    """``e`` with each added term whose seeds are fewer than its sum's given on them."""
    own = _seeds(e, seeds)
    if len(own) < 2 or not e.args:
        return e  # nothing mixes below: one chain, or none
    if isinstance(e, sp.Add):
        # terms reached from the same cotangents are given together: a sum of them is still
        # one sum to the lowering's fusions (a + b * c as one addcmul)
        groups: dict[frozenset[int], list[sp.Expr]] = {}
        for a in e.args:
            groups.setdefault(_seeds(a, seeds), []).append(_gate(a, seeds))
        return sp.Add(*[_given(sp.Add(*terms), own, seeds) for terms in groups.values()])
    if isinstance(e, where):
        c, a, b = e.args
        a, b = (_given(_gate(x, seeds), own, seeds) for x in (a, b))
        return where(c, a, b)
    return e.func(*[_gate(a, seeds) for a in e.args])  # a product, a Sum, a call: inside


def _given(term: sp.Expr, whole: frozenset[int], seeds: Mapping[str, frozenset[int]]) -> sp.Expr:
    own = _seeds(term, seeds)
    return term if not own or own == whole else given(term, *sorted(own))
