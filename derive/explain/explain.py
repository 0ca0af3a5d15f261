"""One op's derivation gathered for reading: what ``show`` prints and FORMULAS.md renders.

Nothing here derives anything of its own or types a formula in; it asks the pipeline:

- the **chain**: each tensor's adjoint as reverse mode first writes it, a sum over its
  consumers of their adjoint times a partial derivative, Kronecker deltas and all
  (``derive(stepwise=True)``'s raw terms, bound indices renamed readably);
- the **simplified** step: that chain alone through the rewrite rules (the stepwise form,
  ``Derivation.steps``: recorded by the derivation, not derived again);
- the **collapsed** adjoint: inlined down to ``grad_out`` and simplified as one expression
  (:class:`~derive.symbolic.derivation.Collapser`), where chains cancel (``dlogit_maxes`` -> 0);
- the **emitted** torch statements, cut out of the generated module's text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import sympy as sp

from derive.errors import DerivationError
from derive.explain.excerpt import excerpts
from derive.language import Definition, Graph, Op, parse
from derive.symbolic.derivation import Collapser, Derivation, Lazy, derived
from derive.symbolic.indices import canonical_bound
from derive.symbolic.reverse import GRAD_OUT, Adjoints

# A stepwise op's intermediates are collapsed only while the inlined chain stays small (the
# loss head of the exercise): SymPy needs seconds per tensor beyond ~30 nested sums.
COLLAPSE_SUMS = 24
COMPUTED = " (computed)"  # marks the form the generated module evaluates
OPAQUE_TEMPLATE_NAMES = {GRAD_OUT, "batch_shape"}  # plumbing of the module, not of a gradient


@dataclass(frozen=True)
class Step:
    """One tensor's adjoint, from the chain rule to the torch that computes it."""

    tensor: str
    adjoint: str  # the variable of the generated code: dlogits
    lhs: sp.Expr  # dlogits[n, c]
    is_input: bool
    chain: sp.Expr
    simplified: sp.Expr | None  # None if the step does not simplify on its own
    collapsed: sp.Expr | None  # None where not computed, or equal to ``simplified``
    computed: str | None  # "simplified" / "collapsed": the form the module evaluates
    emitted: str | None  # the module's statements for it (None: the module never forms it)

    def forms(self) -> list[tuple[str, sp.Expr]]:
        """(label, right-hand side) of each form there is, from the chain rule on."""
        out = [("chain rule", self.chain)]
        if self.simplified is not None:
            out.append(("simplified", self.simplified))
        if self.collapsed is not None:
            out.append(("collapsed to grad_out", self.collapsed))
        mark = {"simplified": 1, "collapsed": len(out) - 1}.get(self.computed or "")
        if mark is not None:
            out[mark] = (out[mark][0] + COMPUTED, out[mark][1])
        return out


@dataclass(frozen=True)
class Explanation:
    op: Op
    output: str  # the forward's output; its adjoint is grad_out
    forward: list[tuple[sp.Expr, sp.Expr]]  # (lhs, rhs) per definition, forward order
    steps: list[Step]  # reverse order: the output's consumers first, inputs last
    raw: Mapping[str, sp.Expr]  # input -> adjoint as first derived (collapsed ops: inlined)
    final: dict[str, sp.Expr]  # input -> adjoint the module computes
    module: str  # the generated module's text


def _forward(g: Graph) -> list[tuple[sp.Expr, sp.Expr]]:
    out = []
    for step in g.steps:
        t = g.tensors[step.name]
        if isinstance(step, Definition):
            lhs = t.base[step.indices] if t.dims else sp.Symbol(step.name, real=True)
            out.append((lhs, step.body))
        else:  # a view: the same data under another shape
            view = sp.Function("view")(sp.Symbol(step.source), *t.dims)
            out.append((sp.Symbol(step.name), view))
    return out


def _order(d: Derivation) -> list[str]:
    g, exprs = d.graph, d.adjoints.exprs
    return [s.name for s in reversed(g.steps) if s.name in exprs] + [
        t for t in g.inputs if t in exprs
    ]


def _sums(expr: sp.Expr) -> int:
    return sum(1 for e in sp.preorder_traversal(expr) if isinstance(e, sp.Sum))


def _uses(expr: sp.Basic) -> list[str]:
    """Every occurrence of a name as a tensor (Indexed or scalar Symbol), with repeats."""
    if isinstance(expr, sp.Indexed):
        return [expr.base.label.name]
    if isinstance(expr, sp.Symbol):
        return [expr.name]
    return [name for a in expr.args for name in _uses(a)]


def _inlined_size(adj: Adjoints, t: str, memo: dict) -> tuple[int, bool]:
    """(Sums in the adjoint of t inlined down to grad_out, whether it reaches a view's
    adjoint), counted on the step expressions without inlining them (that is the slow part)."""
    if t not in memo:
        owner = {adj.names[u]: u for u in adj.exprs}
        sums, view = _sums(adj.exprs[t]), False
        for name in _uses(adj.exprs[t]):
            if name in owner:
                inner = _inlined_size(adj, owner[name], memo)
                sums, view = sums + inner[0], view or inner[1]
            view = view or name in adj.views
        memo[t] = (sums, view)
    return memo[t]


def _collapsed(d: Derivation, order: list[str]) -> dict[str, sp.Expr]:
    """Each tensor's adjoint inlined down to grad_out and simplified, where that is cheap.

    A view's adjoint is a reshape, not an expression: inlining stops there (views cleared on a
    copy), and an adjoint that reads one is not collapsed.
    """
    adj, memo, out = d.adjoints, {}, {}
    collapser = d.collapser or Collapser(d.graph, dataclasses.replace(adj, views={}))
    for t in order:
        if not d.stepwise and t in d.final:
            out[t] = d.final[t]
            continue
        sums, view = _inlined_size(adj, t, memo)
        if view or (d.stepwise and sums > COLLAPSE_SUMS):
            continue
        try:
            simplified = collapser.simplified(t)
        except DerivationError:
            continue
        if not simplified.has(sp.Derivative, sp.Piecewise, sp.nan, sp.zoo):
            out[t] = canonical_bound(simplified, adj.free[t])
    return out


def _emitted(d: Derivation, module: str, order: list[str]) -> dict[str, str]:
    g, names = d.graph, d.adjoints.names
    opaque = {s.name for s in g.sizes} | {p.name for p in g.params} | OPAQUE_TEMPLATE_NAMES
    opaque |= set(names.values())
    found = excerpts(module, [names[t] for t in order], opaque)
    return {t: found[names[t]] for t in order if names[t] in found}


def explain(op: Op, module: str, d: Derivation | None = None) -> Explanation:
    """Gather the derivation of ``op``; ``module`` is the text the generator emitted for it.

    ``d``: the derivation the module was generated from; by default the generator's recent one
    (:func:`~derive.symbolic.derivation.derived`), so nothing is derived twice.
    """
    d = d or derived(parse(op))
    stepwise = d.steps
    order = _order(d)
    collapsed = _collapsed(d, order)
    emitted = _emitted(d, module, order)
    adj, steps = d.adjoints, []
    for t in order:
        simplified = stepwise[t] if stepwise is not None else None
        coll = collapsed.get(t)
        coll = None if coll == simplified else coll
        computed = None
        if t in d.final:
            computed = "simplified" if d.stepwise or coll is None else "collapsed"
        steps.append(
            Step(
                tensor=t,
                adjoint=adj.names[t],
                lhs=adj.symbol(t, adj.free[t]),
                is_input=t in d.graph.inputs,
                chain=canonical_bound(adj.exprs[t], adj.free[t]),
                simplified=simplified,
                collapsed=coll,
                computed=computed,
                emitted=emitted.get(t),
            )
        )
    raw = Lazy(list(d.raw), lambda t: canonical_bound(d.raw[t], adj.free[t]))  # --json only
    return Explanation(op, d.graph.output, _forward(d.graph), steps, raw, dict(d.final), module)
