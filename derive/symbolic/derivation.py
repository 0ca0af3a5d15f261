"""The symbolic stage's entry point: a parsed :class:`~derive.language.Graph` in, a
:class:`Derivation` out (reverse mode, inline, simplify, fold; the forward stabilised).

Two shapes of result:
- collapsed (the default): each input's adjoint inlined down to ``grad_out``, simplified as one
  expression, so chains collapse (:mod:`derive.symbolic.collapse`);
- stepwise (``Op(stepwise=True)``): every tensor's adjoint in terms of its consumers' adjoints,
  the seed's step-by-step form, each step simplified on its own.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass

import sympy as sp

from derive.errors import DerivationError, EngineBug
from derive.identities import ACCURACY_RULES, rewrite, sigmoid_complements
from derive.language import Definition, Graph, ReduceMax, View
from derive.progress import Stage, silent
from derive.symbolic.canon import Canon, Pattern, fold, ruled_patterns, stabilise
from derive.symbolic.collapse import (
    Collapser,
    Lazy,
    collapse_blocks,
    collapse_each,
    reading_collapser,
    tidy,
)
from derive.symbolic.cuts import cuts
from derive.symbolic.indices import free_indices
from derive.symbolic.reverse import GRAD_OUT, Adjoints, derive_adjoints, live_tensors
from derive.symbolic.saving import lift_saved_calls, unlift
from derive.symbolic.shifts import unseen_shifts
from derive.symbolic.simplify import Simplifier


@dataclass
class Derivation:
    """What the symbolic stage made of one op, for every later stage to read: emission lowers
    ``forward`` and ``final``; explain presents ``adjoints`` (the chain rule), ``steps``,
    ``collapsed`` and ``final``. Nothing downstream derives, simplifies or folds again."""

    graph: Graph
    adjoints: Adjoints  # reverse mode's: every tensor's adjoint as the chain rule writes it
    order: list[str]  # tensors whose adjoint the backward computes, in computation order
    raw: Mapping[str, sp.Expr]  # as first derived (collapsed: inlined but unsimplified, lazy)
    final: dict[str, sp.Expr]  # simplified and folded: what the module computes
    saved: list[str]  # forward tensors the backward reads (inputs, intermediates, argmaxes)
    forward: list[Definition | View]  # the forward steps, stabilised: what the module runs
    collapser: Collapser | None = None  # collapsed ops: its memos serve the other collapses
    written: Graph | None = None  # as the op wrote it (``graph`` may hold lifted calls)
    cut: frozenset[str] = frozenset()  # intermediates whose adjoints ``final`` keeps (cuts.py)

    @property
    def stepwise(self) -> bool:
        return self.graph.op.stepwise

    @functools.cached_property
    def steps(self) -> dict[str, sp.Expr] | None:
        """Every tensor's adjoint in terms of its consumers', each step simplified on its own
        (the stepwise form, what ``show`` prints as "simplified"), consumers first; None when a
        step does not simplify alone. A stepwise op's are its ``final``; a collapsed op's are
        computed on first use, from the same adjoints."""
        if self.stepwise:
            return self.final
        _, _, final = _stepwise(self.graph, self.adjoints)
        return _checked(self.graph, self.adjoints, final, raise_error=False)

    @functools.cached_property
    def collapsed(self) -> dict[str, sp.Expr]:
        """Every tensor's adjoint collapsed down to grad_out where that is cheap (the inputs'
        of a collapsed op are its ``final``), consumers first; computed on first use."""
        order = adjoint_order(self.graph, self.adjoints)
        # a collapsed op's final adjoints are collapsed down to grad_out unless they read a cut
        done = (
            {}
            if self.stepwise or self.cut
            else {t: self.final[t] for t in order if t in self.final}
        )
        rest = [t for t in order if t not in done]
        done |= collapse_each(self.graph, self.adjoints, rest, self._reader, self.stepwise)
        return {t: done[t] for t in order if t in done}

    @functools.cached_property
    def blocks(self) -> dict[str, tuple[str, sp.Expr]]:
        """``{x: (y, dx in terms of dy)}`` where the steps from x to y are a function of x
        alone (:func:`~derive.symbolic.collapse.block_output`): the softmax inside attention,
        ``dscores`` in terms of ``dprobs``; computed on first use."""
        g = self.adjoints.graph  # the graph the adjoints were derived on (calls lifted)
        return collapse_blocks(g, self.adjoints, adjoint_order(g, self.adjoints), self._reader)

    @functools.cached_property
    def _reader(self) -> Collapser:
        """The collapser ``collapsed`` and ``blocks`` share: a collapsed op's own (its memos
        hold the inputs' adjoints already), or one made for reading a stepwise op."""
        return self.collapser or reading_collapser(self.adjoints.graph, self.adjoints)


def adjoint_order(g: Graph, adj: Adjoints) -> list[str]:
    """Every tensor with an adjoint, consumers first: the steps in reverse, then the inputs."""
    order = [s.name for s in reversed(g.steps) if s.name in adj.exprs]
    return order + [t for t in g.inputs if t in adj.exprs]


def local_patterns(g: Graph) -> list[Pattern]:
    """Un-inlined bodies, for the stepwise form: exp(norm_logits) -> counts, tanh(..) -> h;
    of the definitions the output reads, the ones the forward computes (see :class:`Canon`)."""
    out, live = [], live_tensors(g)
    for step in reversed(g.steps):
        if isinstance(step, Definition) and step.name in live and not step.body.has(sp.Sum):
            t = g.tensors[step.name]
            base = t.base if t.dims else t.whole
            out.append(Pattern(step.name, base, step.indices, step.body))
    return out


def _collapsed_inputs(
    collapser: Collapser, cut: frozenset[str], stage: Stage = silent
) -> tuple[list[str], Mapping, dict]:
    g = collapser.canon.graph
    # a view of an input (Wh = view(Wqkv, C, 3, H, D)) is collapsed like an input; the input's
    # own adjoint is then the reverse view, a reshape (emitted right after the view's adjoint)
    views = [s for s in g.steps if isinstance(s, View)]
    inputs = [
        t
        for i in g.inputs
        if not g.tensors[i].integer
        for t in [v.name for v in views if v.source == i] + [i]
        if t in collapser.adj.exprs  # a view that is the output has grad_out as its adjoint
    ]
    # the cuts' adjoints first, consumers first, each collapsed down to the next cut's
    # (derive/symbolic/cuts.py); the inputs' read them by name
    order = [t for t in adjoint_order(g, collapser.adj) if t in cut and t not in inputs]
    order += inputs
    final, kept = {}, set(cut)
    for k, t in enumerate(order):
        stage(f"simplifying the adjoint of {t} ({k + 1} of {len(order)})")
        final[t] = collapser.simplified(t, frozenset(kept))
        if t in cut and isinstance(final[t], (sp.Indexed, sp.Symbol, sp.Number)):
            # a cut whose adjoint is a read (grad_out reshaped, where the output is its view)
            # or a number computes nothing: the inputs' adjoints read through it
            kept.discard(t)
            del final[t]
        elif t in cut:
            collapser.mask(t, final[t])
    order = [t for t in order if t in final]
    raw = Lazy(order, collapser.raw)
    return order, raw, final


def _stepwise(g: Graph, adj: Adjoints, stage: Stage = silent) -> tuple[list[str], dict, dict]:
    simplifier, folded = Simplifier(), {}
    patterns = ruled_patterns(local_patterns(g), _ruled)
    order = adjoint_order(g, adj)
    raw = {t: adj.exprs[t] for t in order}
    final = {}
    for k, t in enumerate(order):
        stage(f"simplifying the adjoint of {t} ({k + 1} of {len(order)})")
        simplified = _ruled(simplifier.simplify(raw[t]))
        final[t] = tidy(fold(simplified, patterns, folded))  # exact, a term's too
    return order, raw, final


def _ruled(e: sp.Expr) -> sp.Expr:
    e = sigmoid_complements(e, terms=True)  # 1 - s
    return rewrite(e, ACCURACY_RULES)  # expm1's e^x / expm1(x), as collapsed


def _saved(g: Graph, adj: Adjoints, final: dict[str, sp.Expr]) -> list[str]:
    forward = set(g.tensors) | {a.name for a in adj.argmax.values()}
    used = {i.base.label.name for e in final.values() for i in e.atoms(sp.Indexed)}
    # a 0-d tensor read whole is a Symbol; an index is an integer Symbol, and may share a
    # tensor's name (index a1 over (A, A) beside a tensor a1): that is no read of the tensor
    used |= {s.name for e in final.values() for s in e.atoms(sp.Symbol) if not s.is_integer}
    # the reverse view of an intermediate reads its shape; an input's is the op's sizes, and
    # so is the output's source's (grad_out reshaped: its sizes are bound from grad_out)
    used |= {src for d, src in adj.views.values() if src not in g.inputs and d != GRAD_OUT}
    order = list(g.tensors) + [a.name for a in adj.argmax.values()]
    return [t for t in order if t in used & forward]


def _checked(g: Graph, adj: Adjoints, final: dict, raise_error: bool = True) -> dict | None:
    """Bound indices renamed readably; an adjoint SymPy could not finish is an error (None)."""
    final = {t: adj.readable(e, t) for t, e in final.items()}
    for t, e in final.items():
        if e.has(sp.Derivative, sp.Piecewise, sp.nan, sp.zoo):
            if not raise_error:
                return None
            raise DerivationError(g.op.name, f"the adjoint of {t} did not simplify: {e}")
        if e.has(sp.I):  # SymPy took a root or log of a negative value: never lowered
            if not raise_error:
                return None
            raise DerivationError(
                g.op.name,
                f"the adjoint of {t} is complex ({e}): a square root or log of a value that "
                "is negative wherever the op is defined; the op language is real",
            )
        stray = sorted(map(str, free_indices(e) - set(adj.free[t])))
        if stray:  # a rule let a bound index escape its Sum: refuse, never lower it
            raise EngineBug(g.op.name, f"the adjoint of {t} reads {stray} outside their sums")
    return final


def derive(g: Graph, stage: Stage = silent) -> Derivation:
    """Derive, simplify and fold the backward of ``g``.

    Costly calls inside definitions are lifted first, so the fold can read them from the
    forward; those the backward does not read go back into their definitions (see
    :mod:`derive.symbolic.saving`). ``Derivation.graph`` is the graph the forward runs.
    ``stage`` hears each adjoint's simplification start (:mod:`derive.progress`).
    """
    lifted = lift_saved_calls(g)
    # collapsed ops only. A step-by-step op shows each adjoint as the chain rule gives it (the
    # exercise's dlogit_maxes); and the double backward's chain rule keeps the max path, whose
    # scatter cancels a saturated softmax's terms exactly: without it, BERT's additive mask
    # (tests/cases/softmax_under_an_additive_mask.py, d2/dkeep through two factors of 1e4)
    # gave 2.4e-8 where the exact value, autograd's and torch's softmax give 0
    unseen = frozenset() if g.op.stepwise else unseen_shifts(lifted)
    adj = derive_adjoints(lifted, unseen)
    collapser = None if g.op.stepwise else Collapser(lifted, adj)
    cut = frozenset() if collapser is None else cuts(lifted, adj)
    order, raw, final = (
        _stepwise(lifted, adj, stage)
        if collapser is None
        else _collapsed_inputs(collapser, cut, stage)
    )
    cut &= frozenset(order)  # those kept
    if len(set(order)) != len(order):  # the double backward would define one twice
        raise EngineBug(g.op.name, f"an adjoint is computed twice: {order}")
    final = _checked(lifted, adj, final)
    if g.gradient_only:  # its cotangent is 1
        one = {sp.Symbol(GRAD_OUT, real=True): sp.S.One}
        final = {t: e.xreplace(one) for t, e in final.items()}
    saved = _saved(lifted, adj, final)
    graph = unlift(lifted, g, set(saved) | cut)  # a cut keeps its tensor, for its shape
    # a definition neither the output nor the backward reads is not computed (its adjoint is
    # 0); one the output does not read may still be saved: folding writes hid[d] as prob[d]
    # where prob[o] = hid[o] (fuzz seed 160066)
    # (read off the stabilised bodies: focal_loss_by_hand's p[n, c] = e / Sum(e), which its
    # loss reads only through log(p[n, y[n]]) rewritten to x - m - log(Sum(e)), was computed
    # and never read, an N x C tensor per call)
    stabilised = _stabilised(graph, adj)
    needed = live_tensors(
        dataclasses.replace(graph, steps=stabilised), also=saved, output=not g.gradient_only
    )
    forward = [s for s in stabilised if s.name in needed]
    return Derivation(graph, adj, order, raw, final, saved, forward, collapser, written=g, cut=cut)


def _stabilised(g: Graph, adj: Adjoints) -> list[Definition | View]:
    """The forward as the module computes it: each body through the forward rules for range
    (``log(probs)`` -> ``norm_logits - log(counts_sum)``); views and Max as written."""
    canon, earlier, out = Canon(g, adj.fresh), set(), []
    for step in g.steps:
        if isinstance(step, Definition) and not isinstance(step.body, ReduceMax):
            step = dataclasses.replace(step, body=stabilise(step.body, canon, earlier))
        out.append(step)
        earlier.add(step.name)
    return out
