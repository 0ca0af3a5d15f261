"""From a parsed graph to simplified adjoints: reverse mode, inline, simplify, fold.

Two shapes of result:
- collapsed (the default): each input's adjoint inlined down to ``grad_out``, simplified as one
  expression, so chains collapse (softmax + cross-entropy to ``(probs - onehot) / N``). Each
  step is simplified on its own before it is inlined (its Kronecker deltas go while it is
  small), and the passes memoise per distinct sub-expression, so the work grows polynomially
  with the length of a chain, not as 2**n;
- stepwise (``Op(stepwise=True)``): every tensor's adjoint in terms of its consumers' adjoints,
  the seed's step-by-step form, each step simplified on its own.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import sympy as sp

from derive.errors import DerivationError
from derive.identities import FORWARD_RULES, rewrite
from derive.language import Definition, Graph
from derive.symbolic.canon import Canon, Pattern, fold
from derive.symbolic.indices import canonical_bound
from derive.symbolic.reverse import Adjoints, derive_adjoints, inline
from derive.symbolic.simplify import Simplifier, cost


@dataclass
class Derivation:
    graph: Graph
    adjoints: Adjoints
    order: list[str]  # tensors whose adjoint the backward computes, in computation order
    raw: Mapping[str, sp.Expr]  # as first derived (collapsed: inlined but unsimplified, lazy)
    final: dict[str, sp.Expr]  # simplified and folded
    saved: list[str]  # forward tensors the backward reads (inputs, intermediates, argmaxes)
    collapser: Collapser | None = None  # collapsed ops: its memos serve show's collapses too

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


class Lazy(Mapping[str, sp.Expr]):
    """``{tensor: expression}`` computed on first access, in key order as given.

    The collapsed raw form (every step inlined, deltas and all) is a nest of as many Sums as
    the chain is long, and SymPy builds a Sum in time linear in its body: only a reader that
    asks for it (``show --json``, the raw-vs-simplified check) pays for it.
    """

    def __init__(self, keys: list[str], compute: Callable[[str], sp.Expr]) -> None:
        self._keys, self._compute, self._done = list(keys), compute, {}

    def __getitem__(self, key: str) -> sp.Expr:
        if key not in self._keys:
            raise KeyError(key)
        if key not in self._done:
            self._done[key] = self._compute(key)
        return self._done[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


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
        self.stepped: dict[str, sp.Expr] = {}  # inline's memo for simplified steps

    def raw(self, tensor: str) -> sp.Expr:
        return inline(self.adj, tensor, self.memo)

    def step(self, tensor: str) -> sp.Expr:
        """One step simplified on its own: its deltas go while the expression is small."""
        return self.simplifier.simplify(self.adj.exprs[tensor])

    def simplified(self, tensor: str) -> sp.Expr:
        # inlining simplified steps, not raw ones: the raw chain of n steps nests n Sums of
        # Kronecker deltas, and SymPy rebuilds each Sum in time linear in its body
        stepped = inline(self.adj, tensor, self.stepped, self.step)
        simplified = self.simplifier.simplify(self.canon.inline(stepped))
        simplified = rewrite(simplified, FORWARD_RULES)  # log(sigma(z)) in a backward too
        # common factors out first: exp(a)/S inside (g/S - h/S**2) exp(a) folds to probs only
        # once 1/S stands beside exp(a)
        return _tidy(fold(_tidy(simplified), self.patterns, self.folded))


def _collapsed(collapser: Collapser) -> tuple[list[str], Mapping, dict]:
    g = collapser.canon.graph
    order = [t for t in g.inputs if not g.tensors[t].integer]
    final = {t: collapser.simplified(t) for t in order}
    raw = Lazy(order, collapser.raw)
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


def _checked(g: Graph, adj: Adjoints, final: dict, raise_error: bool = True) -> dict | None:
    """Bound indices renamed readably; an adjoint SymPy could not finish is an error (None)."""
    final = {t: canonical_bound(e, adj.free[t]) for t, e in final.items()}
    for t, e in final.items():
        if e.has(sp.Derivative, sp.Piecewise, sp.nan, sp.zoo):
            if not raise_error:
                return None
            raise DerivationError(g.op.name, f"the adjoint of {t} did not simplify: {e}")
    return final


# The last derivations, by graph: ``show`` and ``generate --formulas`` read the derivation the
# module was generated from instead of deriving the op again (see :func:`derived`).
# Each entry keeps a copy of what the derivation decided: one changed since (a test's negative
# control edits ``final``) is derived again rather than shown.
_RECENT: OrderedDict[str, tuple[Derivation, tuple]] = OrderedDict()
RECENT = 16


def derive(g: Graph) -> Derivation:
    """Derive, simplify and fold the backward of ``g``."""
    adj = derive_adjoints(g)
    collapser = None if g.op.stepwise else Collapser(g, adj)
    order, raw, final = _stepwise(g, adj) if collapser is None else _collapsed(collapser)
    final = _checked(g, adj, final)
    d = Derivation(g, adj, order, raw, final, _saved(g, adj, final), collapser)
    key = repr(g)
    _RECENT[key] = (d, _decided(d))
    _RECENT.move_to_end(key)
    while len(_RECENT) > RECENT:
        _RECENT.popitem(last=False)
    return d


def derived(g: Graph) -> Derivation:
    """The derivation of ``g``: the one a recent :func:`derive` of an equal graph made (the
    generator's, with its memos), else a new one. For readers (show, the formulas page): the
    generator always derives afresh, so what it emits never depends on what was read before."""
    d, decided = _RECENT.get(repr(g), (None, None))
    return d if d is not None and _decided(d) == decided else derive(g)


def _decided(d: Derivation) -> tuple:
    return tuple(d.order), tuple(d.final.items()), tuple(d.saved)
