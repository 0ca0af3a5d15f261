"""From a parsed graph to simplified adjoints: reverse mode, inline, simplify, fold.

Two shapes of result:
- collapsed (the default): each input's adjoint inlined down to ``grad_out``, simplified as one
  expression, so chains collapse (softmax + cross-entropy to ``(probs - onehot) / N``);
- stepwise (``Op(stepwise=True)``): every tensor's adjoint in terms of its consumers' adjoints,
  the seed's step-by-step form, each step simplified on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.errors import DerivationError
from derive.fold import Canon, Pattern, fold
from derive.indices import canonical_bound
from derive.language import Definition, Graph
from derive.reverse import Adjoints, derive_adjoints, inline
from derive.simplify import Simplifier, cost


@dataclass
class Derivation:
    graph: Graph
    adjoints: Adjoints
    order: list[str]  # tensors whose adjoint the backward computes, in computation order
    raw: dict[str, sp.Expr]  # as first derived (collapsed: inlined but unsimplified)
    final: dict[str, sp.Expr]  # simplified and folded
    saved: list[str]  # forward tensors the backward reads (inputs, intermediates, argmaxes)

    @property
    def stepwise(self) -> bool:
        return self.graph.op.stepwise


def _tidy(expr: sp.Expr) -> sp.Expr:
    # g*a + g*b -> g*(a + b): one multiply fewer per element, and the seeds' closed forms
    tidied = sp.factor_terms(expr)
    return tidied if cost(tidied) <= cost(expr) else expr


def _local_patterns(g: Graph) -> list[Pattern]:
    """Un-inlined bodies, for the stepwise form: exp(norm_logits) -> counts, tanh(..) -> h."""
    out = []
    for step in reversed(g.steps):
        if isinstance(step, Definition) and not step.body.has(sp.Sum):
            t = g.tensors[step.name]
            base = t.base if t.dims else sp.Symbol(step.name, real=True)
            out.append(Pattern(step.name, base, step.indices, step.body))
    return out


class Collapser:
    """The adjoint of any tensor, inlined down to grad_out, simplified and folded."""

    def __init__(self, g: Graph, adj: Adjoints) -> None:
        self.adj, self.canon, self.memo = adj, Canon(g, adj.fresh), {}
        self.simplifier, self.patterns = Simplifier(self.canon.reductions), self.canon.patterns()
        self.folded: dict[sp.Expr, sp.Expr] = {}  # fold's memo, shared by every tensor

    def raw(self, tensor: str) -> sp.Expr:
        return inline(self.adj, tensor, self.memo)

    def simplified(self, tensor: str) -> sp.Expr:
        simplified = self.simplifier.simplify(self.canon.inline(self.raw(tensor)))
        return _tidy(fold(simplified, self.patterns, self.folded))


def _collapsed(g: Graph, adj: Adjoints) -> tuple[list[str], dict, dict]:
    collapser = Collapser(g, adj)
    order = [t for t in g.inputs if not g.tensors[t].integer]
    raw = {t: collapser.raw(t) for t in order}
    final = {t: collapser.simplified(t) for t in order}
    return order, raw, final


def _stepwise(g: Graph, adj: Adjoints) -> tuple[list[str], dict, dict]:
    simplifier, patterns, folded = Simplifier(), _local_patterns(g), {}
    order = [s.name for s in reversed(g.steps) if s.name in adj.exprs]
    order += [t for t in g.inputs if t in adj.exprs]
    raw = {t: adj.exprs[t] for t in order}
    final = {t: _tidy(fold(simplifier.simplify(raw[t]), patterns, folded)) for t in order}
    return order, raw, final


def _saved(g: Graph, adj: Adjoints, final: dict[str, sp.Expr]) -> list[str]:
    forward = set(g.tensors) | {a.name for a in adj.argmax.values()}
    used = {i.base.label.name for e in final.values() for i in e.atoms(sp.Indexed)}
    used |= {s.name for e in final.values() for s in e.atoms(sp.Symbol)}
    used |= {src for _, src in adj.views.values()}  # the reverse view needs the source shape
    order = list(g.tensors) + [a.name for a in adj.argmax.values()]
    return [t for t in order if t in used & forward]


def derive(g: Graph) -> Derivation:
    """Derive, simplify and fold the backward of ``g``."""
    adj = derive_adjoints(g)
    order, raw, final = (_stepwise if g.op.stepwise else _collapsed)(g, adj)
    final = {t: canonical_bound(e, adj.free[t]) for t, e in final.items()}
    for t, e in final.items():
        if e.has(sp.Derivative, sp.Piecewise, sp.nan, sp.zoo):
            raise DerivationError(g.op.name, f"the adjoint of {t} did not simplify: {e}")
    return Derivation(g, adj, order, raw, final, _saved(g, adj, final))
