"""One op's derivation gathered for reading: what ``show`` prints and FORMULAS.md renders.

Nothing here derives anything of its own or types a formula in; it asks the pipeline:

- the **chain**: each tensor's adjoint as reverse mode first writes it, a sum over its
  consumers of their adjoint times a partial derivative, Kronecker deltas and all
  (``derive(stepwise=True)``'s raw terms, bound indices renamed readably);
- the **simplified** step: that chain alone through the rewrite rules (the stepwise form,
  ``Derivation.steps``: recorded by the derivation, not derived again);
- the **block** form, where the steps from a tensor x to one tensor y are a function of x
  alone (attention's softmax from ``scores`` to ``probs``): dx inlined down to dy only,
  ``dscores = probs (dprobs - sum dprobs probs)``, ``Derivation.blocks``;
- the **collapsed** adjoint: inlined down to ``grad_out`` and simplified as one expression,
  where chains cancel (``dlogit_maxes`` -> 0): ``Derivation.collapsed``, recorded by the
  derivation;
- the **kept** form, where the module computes the adjoint collapsed down to the adjoints it
  keeps instead (:mod:`derive.symbolic.cuts`: attention's dq in terms of dscores, dx in terms
  of dq, dk and dv): ``Derivation.final``;
- the **emitted** torch statements: the ones emission recorded for each gradient's variable
  (:mod:`derive.explain.excerpt`), formatted as the module has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy as sp

from derive.emit.generate import Emitted
from derive.emit.statements import Statement
from derive.explain.excerpt import excerpts
from derive.language import Definition, Graph, Op, tensor_reads
from derive.language.argmax import encode
from derive.names import BATCH_SHAPE
from derive.symbolic.collapse import Lazy
from derive.symbolic.derivation import Derivation, adjoint_order
from derive.symbolic.reverse import GRAD_OUT

COMPUTED = " (computed)"  # marks the form the generated module evaluates
OPAQUE_TEMPLATE_NAMES = {GRAD_OUT, BATCH_SHAPE}  # plumbing of the module, not of a gradient


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
    block: tuple[str, sp.Expr] | None  # (dy, dx in terms of dy) where y = F(x) alone
    computed: str | None  # "simplified" / "collapsed" / "kept": the form the module evaluates
    emitted: str | None  # the module's statements for it (None: the module never forms it)
    unseen: bool = False  # a maximum the output does not see: its adjoint is 0, proven
    kept: tuple[tuple[str, ...], sp.Expr] | None = None  # (kept adjoints it reads, the form)

    def forms(self) -> list[tuple[str, sp.Expr]]:
        """(label, right-hand side) of each form there is, from the chain rule on."""
        out = [("chain rule", self.chain)]
        if self.unseen:
            out.append(("0: a shift the output does not see (derive/symbolic/shifts.py)", 0))
        elif self.simplified is not None:
            out.append(("simplified", self.simplified))
        if self.block is not None and self.block[1] not in (self.simplified, self.collapsed):
            out.append((f"collapsed to {self.block[0]}", self.block[1]))
        if self.collapsed is not None:
            out.append(("collapsed to grad_out", self.collapsed))
        if self.kept is not None:
            out.append((f"collapsed to {', '.join(self.kept[0])}", self.kept[1]))
        last = len(out) - 1
        mark = {"simplified": 1, "collapsed": last, "kept": last}.get(self.computed or "")
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
    emitted: Emitted
    # (lhs, rhs) per Max's argmax: saved by the forward, read by a simplified backward
    argmax: list[tuple[sp.Expr, sp.Expr]] = field(default_factory=list)
    # the text of each step of ``forward``: a definition's own, or, for a Max lifted out of one
    # (a Max over two indices is two steps), the lifted step and the definition it came from
    texts: list[str] = field(default_factory=list)
    # (lhs, rhs) per call the derivation named to compute it once (derive/symbolic/saving.py):
    # the backward's steps read them (``dout_tanh0``), and no definition of the op file names them
    lifted: list[tuple[sp.Expr, sp.Expr]] = field(default_factory=list)

    @property
    def module(self) -> str:
        """The generated module's text (rendered when first asked for)."""
        return self.emitted.module


def _forward(g: Graph) -> list[tuple[sp.Expr, sp.Expr]]:
    out = []
    for step in g.steps:
        t = g.tensors[step.name]
        if isinstance(step, Definition):
            lhs = t.base[step.indices] if t.dims else t.whole
            out.append((lhs, step.body))
        else:  # a view: the same data under another shape
            view = sp.Function("view")(sp.Symbol(step.source), *t.dims)
            out.append((sp.Symbol(step.name), view))
    return out


def _argmaxes(d: Derivation) -> list[tuple[sp.Expr, sp.Expr]]:
    """Where each ``<max>_argmax`` a backward reads comes from: the forward saves the index
    its Max picks, ``logit_maxes_argmax[n] = argmax(logits[n, c], c)``; over several indices
    their encoding at the maximum, ``out_argmax[..] = argmax(x[..], W*p + q)`` (its picks
    ``floor(a/W)``, ``Mod(a, W)`` in the backward: :mod:`derive.language.argmax`)."""
    steps = {s.name: s for s in d.graph.steps if isinstance(s, Definition)}
    out = []
    for name, am in d.adjoints.argmax.items():
        if name in d.adjoints.unseen:
            continue  # a shift the output does not see: no backward reads its argmax
        step = steps[name]
        index = encode(step.body, tuple(lim[0] - lim[1] for lim in step.body.limits))
        lhs = am.base[step.indices] if am.dims else sp.Symbol(am.name)
        out.append((lhs, sp.Function("argmax")(step.body.function, index)))
    return out


def _emitted(d: Derivation, statements: list[Statement], order: list[str]) -> dict[str, str]:
    g, names = d.graph, d.adjoints.names
    opaque = {s.name for s in g.sizes} | {p.name for p in g.params} | OPAQUE_TEMPLATE_NAMES
    opaque |= set(names.values())
    found = excerpts(statements, [names[t] for t in order], opaque)
    return {t: found[names[t]] for t in order if names[t] in found}


def explain(e: Emitted) -> Explanation:
    """Gather the derivation of one op as the generator made it (:func:`~derive.emit.generate.emit`
    hands over the derivation, the module and its backward's statements): read, never derived,
    parsed or emitted again."""
    op, d = e.op, e.derivation
    stepwise = d.steps
    order = adjoint_order(d.graph, d.adjoints)
    collapsed = d.collapsed
    emitted = _emitted(d, e.statements, order)
    adj, steps = d.adjoints, []
    for t in order:
        simplified = stepwise[t] if stepwise is not None else None
        coll = collapsed.get(t)
        coll = None if coll == simplified else coll
        computed, kept = None, None
        if t in d.final:
            computed = "simplified" if d.stepwise or coll is None else "collapsed"
            read = tensor_reads(d.final[t], {})  # a cut has axes: its adjoint is read indexed
            reads = sorted(adj.names[c] for c in d.cut if c != t and adj.names[c] in read)
            if reads:
                computed, kept = "kept", (tuple(reads), d.final[t])
        steps.append(
            Step(
                tensor=t,
                adjoint=adj.names[t],
                lhs=adj.symbol(t, adj.free[t]),
                is_input=t in d.graph.inputs,
                chain=adj.readable(adj.unseen.get(t, adj.exprs[t]), t),
                simplified=simplified,
                collapsed=coll,
                block=(adj.names[d.blocks[t][0]], d.blocks[t][1]) if t in d.blocks else None,
                computed=computed,
                emitted=emitted.get(t),
                unseen=t in adj.unseen,
                kept=kept,
            )
        )
    raw = Lazy(list(d.raw), lambda t: adj.readable(d.raw[t], t))  # --json only
    written = d.written or d.graph
    return Explanation(
        op,
        d.graph.output,
        _forward(written),
        steps,
        raw,
        dict(d.final),
        e,
        argmax=_argmaxes(d),
        texts=[step.text for step in written.steps],
        lifted=[
            (lhs, rhs)
            for step, (lhs, rhs) in zip(adj.graph.steps, _forward(adj.graph), strict=True)
            if step.name not in written.tensors
        ],
    )
