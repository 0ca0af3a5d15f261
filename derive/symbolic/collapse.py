"""Collapsing: an adjoint inlined down to ``grad_out`` and simplified as one expression, so
chains cancel (softmax + cross-entropy to ``(probs - onehot) / N``, ``dlogit_maxes`` to 0).

In: the graph and its adjoints from reverse mode; out: each tensor's collapsed adjoint. Each
step is simplified on its own before it is inlined (its Kronecker deltas go while it is
small), and the passes memoise per distinct sub-expression, so the work grows polynomially
with the length of a chain, not as 2**n. :class:`Collapser` serves the collapsed ops' input
adjoints (what their modules compute); :func:`collapse_each` every other tensor's, for reading.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping

import sympy as sp

from derive.errors import DerivationError
from derive.identities import (
    ACCURACY_RULES,
    FORWARD_RULES,
    exp_ratios,
    rewrite,
    sigmoid_complements,
    split_logs,
)
from derive.language import Graph, View
from derive.symbolic.canon import Canon, fold, ruled_patterns
from derive.symbolic.reverse import Adjoints, inline
from derive.symbolic.simplify import (
    Simplifier,
    cancel_exps,
    cost,
    exps_merged,
    masked_off,
    masked_tensors,
    raised_powers,
)

# A stepwise op's intermediates are collapsed only while the inlined chain stays small (the
# loss head of the exercise): SymPy needs seconds per tensor beyond ~30 nested sums.
COLLAPSE_SUMS = 24


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


def tidy(expr: sp.Expr) -> sp.Expr:
    # g*a + g*b -> g*(a + b): one multiply fewer per element, and the seeds' closed forms;
    # never b**g + b**(g + 1) as b (b**(g - 1) + b**g): range before cost (raised_powers)
    tidied = sp.factor_terms(expr)
    if raised_powers(tidied, expr):
        return expr
    return tidied if cost(tidied) <= cost(expr) else expr


class Collapser:
    """The adjoint of any tensor, inlined down to grad_out, simplified and folded."""

    def __init__(self, g: Graph, adj: Adjoints) -> None:
        self.adj, self.canon, self.memo = adj, Canon(g, adj.fresh), {}
        # definitions a where() makes a constant off its condition (the causal mask's probs)
        masked = masked_tensors(g.steps, g.tensors)
        self.simplifier = Simplifier(self.canon.reductions, masked, whole_powers=True)
        # and in the form the simplifier leaves: a factor free of a sum's index goes outside
        # it (1 / Sum_p e[p] s[a] is read as 1 / (s[a] Sum_p e[p]))
        self.patterns = ruled_patterns(self.canon.patterns(), ruled, self._simplified_body)
        self.folded: dict[sp.Expr, sp.Expr] = {}  # fold's memo, shared by every tensor
        self.stepped: dict[str, sp.Expr] = {}  # inline's memo for simplified steps
        self.steps: dict[str, sp.Expr] = {}  # each step simplified, whatever the inlining stops at

    def _simplified_body(self, body: sp.Expr) -> sp.Expr:
        return ruled(self.simplifier.simplify(body))

    def raw(self, tensor: str) -> sp.Expr:
        return inline(self.adj, tensor, self.memo)

    def step(self, tensor: str) -> sp.Expr:
        """One step simplified on its own: its deltas go while the expression is small."""
        if tensor not in self.steps:
            self.steps[tensor] = self.simplifier.simplify(self.adj.exprs[tensor])
        return self.steps[tensor]

    def simplified(self, tensor: str, stop: frozenset[str] = frozenset()) -> sp.Expr:
        """The adjoint inlined down to grad_out, or only down to the adjoints of ``stop``
        (kept as tensors: ``dscores`` in terms of ``dprobs``), simplified and folded."""
        # inlining simplified steps, not raw ones: the raw chain of n steps nests n Sums of
        # Kronecker deltas, and SymPy rebuilds each Sum in time linear in its body
        stepped = inline(self.adj, tensor, {} if stop else self.stepped, self.step, stop)
        simplified = self.simplifier.simplify(self.canon.inline(stepped))
        simplified = cancel_exps(simplified, self.simplifier.simplify)  # 0 * inf multiplied out
        # common factors out first: exp(a)/S inside (g/S - h/S**2) exp(a) folds to probs only
        # once 1/S stands beside exp(a)
        return tidy(fold(tidy(ruled(simplified)), self.patterns, self.folded))

    def mask(self, tensor: str, expr: sp.Expr) -> None:
        """Record ``tensor``'s adjoint ``expr`` (kept as a tensor: a cut) as masked where it is
        a number off a where()'s or a masked tensor's condition (:func:`masked_off`):
        attention's dscores is probs times the rest, 0 above the causal diagonal, so the
        adjoints that read it drop the mask's where() as they did beside probs (a pass over
        (B, H, T, T) otherwise)."""
        masked = self.simplifier.masked
        if (m := masked_off(tuple(self.adj.free[tensor]), expr, masked)) is not None:
            masked[self.adj.names[tensor]] = m


def ruled(expr: sp.Expr) -> sp.Expr:
    """The rules for range a collapsed adjoint goes through after the simplifier; the fold
    patterns go through them too (:func:`~derive.symbolic.canon.ruled_patterns`)."""
    expr = rewrite(expr, FORWARD_RULES)  # log(sigma(z)) in a backward too
    expr = split_logs(expr)  # log(probs) as z - m - log(S), as the forward's
    expr = rewrite(expr, FORWARD_RULES)  # and the rows on what the split left
    # e^a / (e^a r + e^b s) as a sigmoid, as the log's, and what exps it leaves merged
    expr = exps_merged(exp_ratios(expr))
    # log1p and expm1 in a backward too: d log(1 - e^-y) = 1 / (e^y - 1) cancels as the
    # forward did (inf at y = 1e-30, where the forward's log(-expm1(-y)) is -69)
    return sigmoid_complements(rewrite(expr, ACCURACY_RULES))


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


def _reads(g: Graph) -> dict[str, set[str]]:
    """The tensors each step reads (a view: its source)."""
    out = {}
    for step in g.steps:
        if isinstance(step, View):
            out[step.name] = {step.source}
        else:
            out[step.name] = {n for n in _uses(step.body) if n in g.tensors}
    return out


def block_output(g: Graph, x: str) -> str | None:
    """The one tensor y through which ``x`` (an input or intermediate) reaches the rest of the
    op, when every step from x to y reads only x and those steps: y = F(x) is a function of x
    alone, the softmax of attention's scores, layernorm's normalised xhat of x. None when there
    is no such y short of the output, or when x -> y is a single definition (its simplified
    form says it all; views do not count). Int subscripts (``C[X[n, t], e]``) are data, not
    tensors read.

    The adjoint of x collapsed down to dy (:meth:`Collapser.simplified` with ``stop``) is that
    function's backward as one line, ``dscores = probs (dprobs - sum_t2 dprobs probs)``,
    whatever the rest of the op does with y.
    """
    reads = _reads(g)
    block: list[str] = []
    for step in g.steps:
        inside = {x, *block}
        if step.name != x and reads[step.name] & inside and reads[step.name] <= inside:
            block.append(step.name)
    members = set(block)
    readers = {t: {s for s, r in reads.items() if t in r} for t in [x, *block]}
    if not readers[x] <= members:
        return None
    outputs = [t for t in block if t == g.output or not readers[t] <= members]
    views = {s.name for s in g.steps if isinstance(s, View)}
    if len(outputs) != 1 or outputs[0] == g.output or len(members - views) < 2:
        return None
    return outputs[0]


def reading_collapser(g: Graph, adj: Adjoints) -> Collapser:
    """A collapser for reading a stepwise op's adjoints (:func:`collapse_each`,
    :func:`collapse_blocks`). A view's adjoint is a reshape, not an expression: inlining stops
    there, so the views are cleared on a copy of the adjoints."""
    return Collapser(g, dataclasses.replace(adj, views={}))


def collapse_blocks(
    g: Graph, adj: Adjoints, order: list[str], collapser: Collapser
) -> dict[str, tuple[str, sp.Expr]]:
    """``{x: (y, dx collapsed down to dy)}`` for each tensor x in ``order`` with a
    :func:`block_output` y (``collapser``: as for :func:`collapse_each`)."""
    out = {}
    for x in order:
        y = block_output(g, x)
        if y is None or y not in adj.exprs:
            continue
        try:
            expr = collapser.simplified(x, frozenset([y]))
        except DerivationError:
            continue
        if not expr.has(sp.Derivative, sp.Piecewise, sp.nan, sp.zoo):
            out[x] = (y, adj.readable(expr, x))
    return out


def collapse_each(
    g: Graph, adj: Adjoints, order: list[str], collapser: Collapser, stepwise: bool
) -> dict[str, sp.Expr]:
    """Each tensor's adjoint in ``order`` inlined down to grad_out and simplified, where that
    is cheap (``collapser``: a collapsed op's, whose memos the inputs' adjoints filled already,
    or a stepwise op's :func:`reading_collapser`, whose chains are only collapsed while short).

    An adjoint that reads a view's adjoint (a reshape) is not collapsed.
    """
    memo, out = {}, {}
    for t in order:
        sums, view = _inlined_size(adj, t, memo)
        if view or (stepwise and sums > COLLAPSE_SUMS):
            continue
        try:
            simplified = collapser.simplified(t)
        except DerivationError:
            continue
        if not simplified.has(sp.Derivative, sp.Piecewise, sp.nan, sp.zoo):
            out[t] = adj.readable(simplified, t)
    return out
