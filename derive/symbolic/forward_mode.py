"""Forward mode, derived: the tangent of every tensor of an op, in index form.

With a tangent ``t_v`` for each float input, a definition ``u[I] = f(..., v[K], ...)`` has

    t_u[I] = sum over the reads v[K] of f:  d f / d v[K] * t_v[K]

Forward mode keeps each read where it stands: no deltas against the output's indices, no
index inversion, no scatter. A Sum's tangent is the Sum of its body's tangent; a Max's is its
body's tangent at the argmax,

    t_m[I] = sum_c delta(c, argmax[I]) * t_f(I, c)  ->  t_f(I, argmax[I])

(the simplifier eliminates the delta: a gather; over several indices one delta each, against
the argmax's digits ``floor(a/M)``, ``Mod(a, M)``), as autograd's max picks one entry; a view's
tangent is the same view of its source's tangent. Each tangent is derived from the forward
*as the module runs it* (stabilised for range: ``log(probs)`` read as ``norm_logits -
log(counts_sum)``), simplified by the backward's rules and folded onto the forward's tensors
(``1 - tanh(x)**2 -> 1 - out**2``), one step per tensor, reading earlier tangents by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp

from derive.errors import DerivationError, EngineBug
from derive.identities import ACCURACY_RULES, rewrite
from derive.language import Definition, Graph, ReduceMax, Tensor, View
from derive.symbolic.canon import fold
from derive.symbolic.collapse import tidy
from derive.symbolic.derivation import Derivation, local_patterns
from derive.symbolic.indices import free_indices, nice_indices
from derive.symbolic.reverse import live_tensors
from derive.symbolic.second_order import TensorNames
from derive.symbolic.simplify import Simplifier
from derive.symbolic.tangent import Tangent


@dataclass(frozen=True)
class Tangents:
    """The op's tangent map as a graph: the forward's steps, then one tangent step per float
    tensor whose tangent is not zero; its output is the output's tangent."""

    graph: Graph  # inputs: the op's, then a tangent per float input, in input order
    argmaxes: dict[str, str]  # Max definition -> the argmax tensor a tangent step reads
    steps: list[Definition | View]  # the tangent steps alone, in order (what ``show`` prints)


@dataclass
class _Builder:
    """The tangent graph as it grows."""

    d: Derivation
    fresh: TensorNames
    tensors: dict[str, Tensor]
    tangents: dict[str, Tensor]  # forward tensor -> its tangent (nonzero ones only)
    steps: list[Definition | View]
    argmaxes: dict[str, str]

    def tangent_of(self, name: str) -> Tensor:
        src = self.d.graph.tensors[name]
        t = Tensor(self.fresh(f"t_{name}"), src.dims, batched=src.batched)
        self.tensors[t.name] = t
        self.tangents[name] = t
        return t

    def zero(self, name: str) -> None:
        """``t_name = 0``: the tangent of a tensor that is constant where it is defined."""
        t = self.tangent_of(name)
        indices = nice_indices(t.dims, self.fresh.taken)
        lhs = f"[{', '.join(map(str, indices))}]" if indices else ""
        self.steps.append(Definition(t.name, indices, sp.S.Zero, f"{t.name}{lhs} = 0"))

    def view(self, step: View) -> None:
        if step.source in self.tangents:
            source = self.tangents[step.source].name
            t = self.tangent_of(step.name)
            self.steps.append(View(t.name, source, f"{t.name} = view({source})"))

    def definition(self, step: Definition, simplify: Callable[[sp.Expr], sp.Expr]) -> None:
        g, pick = self.d.graph, None
        if step.name in self.d.adjoints.unseen:
            return  # a shift the output does not see: any tangent of it, 0 too, gives its own
        if isinstance(step.body, ReduceMax):
            am = self.d.adjoints.argmax[step.name]
            self.tensors[am.name] = am
            pick = am.base[step.indices] if step.indices else sp.Symbol(am.name)
        raw = Tangent(g.op.name, step.text, self.tangents, pick, self.d.adjoints.squares)(step.body)
        body = simplify(raw)
        if body == 0:
            return
        if body.has(sp.Derivative, sp.Piecewise, sp.nan, sp.zoo):
            raise DerivationError(g.op.name, f"the tangent of {step.name} did not simplify: {body}")
        stray = sorted(map(str, free_indices(body) - set(step.indices)))
        if stray:
            raise EngineBug(g.op.name, f"the tangent of {step.name} reads {stray} outside sums")
        if pick is not None and body.has(pick.base if step.indices else pick):
            self.argmaxes[step.name] = am.name
        t = self.tangent_of(step.name)
        lhs = f"[{', '.join(map(str, step.indices))}]" if step.indices else ""
        self.steps.append(Definition(t.name, step.indices, body, f"{t.name}{lhs} = {body}"))


def tangent_graph(d: Derivation) -> Tangents:
    """The tangent map of ``d``'s op (module docstring), a graph the forward lowering runs."""
    g = d.graph
    fresh = TensorNames(g)
    fresh.taken.update(a.name for a in d.adjoints.argmax.values())
    b = _Builder(d, fresh, dict(g.tensors), {}, [], {})
    inputs = [b.tangent_of(x).name for x in g.inputs if not g.tensors[x].integer]
    patterns, folded, simplifier = local_patterns(g), {}, Simplifier()

    def simplify(raw: sp.Expr) -> sp.Expr:  # the accuracy rows, as the backward's steps take
        return tidy(fold(rewrite(simplifier.simplify(raw), ACCURACY_RULES), patterns, folded))

    for step in d.forward:
        if isinstance(step, View):
            b.view(step)
        else:
            b.definition(step, simplify)
    if g.output not in b.tangents:  # a step of a step, sign(..): constant, its tangent is 0
        b.zero(g.output)
    output = b.tangents[g.output].name
    forward = list(d.forward)
    op = dataclasses.replace(g.op, doc=f"the tangent map of {g.op.name}")
    graph = Graph(
        op, g.sizes, g.params, b.tensors, list(g.inputs) + inputs, forward + b.steps, output
    )
    graph.derived = dict(g.derived)
    graph.sums = g.sums  # the forward's text: its sums are added as written in the tangent too
    graph.logs = g.logs  # and its logs put back in their exps
    live = live_tensors(graph, also=b.argmaxes)  # a Max whose argmax a tangent reads
    graph.steps = [s for s in graph.steps if s.name in live]
    return Tangents(graph, b.argmaxes, [s for s in b.steps if s.name in live])
