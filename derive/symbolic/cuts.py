"""Where a collapsed backward keeps an intermediate's adjoint as a tensor of its own.

Collapsing inlines every adjoint down to ``grad_out``, so chains cancel (softmax + cross-entropy
to ``(probs - onehot) / N``). Through a contraction nothing cancels: the adjoint of
``h[v, k, d] = Sum(x[v, f] W[f, k, d], f)`` is linear in ``dh``, ``dx = dh W^T`` and
``dW = x^T dh``, and inlined, ``dh``'s whole expression is written twice, once into each
input's adjoint, where the lowering contracts each copy on its own and in its own order. A GAT
layer (its scores and messages summed over E edges from a projection of V nodes) contracted
``W`` against the edges' gathered reads at E, where ``dh`` computed once at V and multiplied
out twice is autograd's plan: 2.2x autograd's time collapsed, 1.05x step by step.

A *cut* is an intermediate whose adjoint the backward computes once, collapsed down to
``grad_out`` (or to the next cut), and the inputs' adjoints read by name. Three kinds:

- a contraction in a matmul's shape, ``t = Sum(a b, i)`` with a and b each holding an index
  of its own, that two or more float inputs reach (two adjoints would read dt);
- a tensor a definition fans out, ``u = .. t[idx[e]] ..``: read at an index tensor's entry
  over an axis e that is none of the read's plain subscripts (GAT's ``el[src[e]]``). dt is a
  sum over the edges; inlined, what reads it (``dasrc = Sum_v del[v] h[v]``, dh) took that
  sum with h gathered to (E, K, D); kept, del is (V, K), read once per node;
- a tensor whose adjoint a consumer's step fans out, ``du = .. dt[idx[e]] ..`` (reverse mode
  writes it as a sum over v of ``dt[v]`` where ``idx[e] == v``): a segment sum
  ``den[v] = Sum(where(dst[e] == v, ex[e], 0), e)`` gives dex[e] the read dden[dst[e]].
  Inlined, dden was evaluated once per edge (a (V, K, D) scatter gathered back to (E, K, D)
  and summed over D at each edge); kept, it is (V, K) and the edges gather it.

A pick is no fan-out: the adjoint of ``logprobs[n, Y[n]]`` scatters into dlogprobs and reads
nothing gathered, and collapsing through it is what makes cross-entropy's
``(probs - onehot) / N``. A view is never a cut: an input's view is collapsed as the input is.

The simplifications that matter happen between cuts: a softmax's or a normalisation's steps
read one tensor each and are no contraction (layernorm's variance sums ``diff * diff`` of x
alone, which one input reaches: no cut), and the max-shift's adjoint is 0 wherever the output
does not see it, whatever is cut (:mod:`derive.symbolic.shifts`).
"""

from __future__ import annotations

import itertools

import sympy as sp

from derive.language import Definition, Graph, View, tensor_reads
from derive.symbolic.reverse import Adjoints


def cuts(g: Graph, adj: Adjoints) -> frozenset[str]:
    """The intermediates of ``g`` whose adjoints a collapsed backward keeps (module docstring),
    read off the forward and reverse mode's steps as written (none simplified here: the
    collapse simplifies each step once a cut's mask is known, :meth:`Collapser.mask`)."""
    floats = {t for t in g.inputs if not g.tensors[t].integer}
    deps: dict[str, frozenset[str]] = {t: frozenset([t]) & floats for t in g.inputs}
    out = set()
    for s in g.steps:
        if isinstance(s, View):
            deps[s.name] = deps.get(s.source, frozenset())
            continue
        reads = tensor_reads(s.body, g.tensors)
        deps[s.name] = frozenset().union(*(deps.get(r, frozenset()) for r in reads))
        if len(deps[s.name]) >= 2 and _contracts(s, g):
            out.add(s.name)
        out |= _fanned_out(s.body, g) & set(g.tensors)
    owner = {adj.names[t]: t for t in adj.exprs}
    for u in adj.exprs:
        out |= {owner[name] for name in _fanned_out(adj.exprs[u], g) if name in owner}
    # an input's view is collapsed as an input is (its adjoint is the input's, reshaped)
    inputs = set(g.inputs) | {s.name for s in g.steps if isinstance(s, View)}
    return frozenset(
        t for t in out if t != g.output and t not in inputs and t in adj.exprs and g.tensors[t].dims
    )


def _fanned_out(e: sp.Basic, g: Graph) -> set[str]:
    """The names ``e`` reads at an index tensor's entry over an axis that is none of the
    read's plain subscripts (module docstring): ``dt[idx[e], k]``, or ``dt[v, k]`` under a sum
    over v whose summand has v equal to ``idx[e]`` (a where() or delta not yet solved)."""
    out = set()
    for read in e.atoms(sp.Indexed):
        for i in read.indices:
            if _data(i, g) and not _symbols(i, g) <= _plain(read.indices):
                out.add(read.base.label.name)
    for total in e.atoms(sp.Sum):
        for equal in total.function.atoms(sp.Eq, sp.KroneckerDelta):
            for v in (lim[0] for lim in total.limits if lim[0] in equal.args[:2]):
                others = [a for a in equal.args[:2] if a != v]
                if len(others) != 1 or not _data(others[0], g):
                    continue
                at = others[0]
                for read in total.function.atoms(sp.Indexed):
                    if v in read.indices and not _symbols(at, g) <= _plain(read.indices) - {v}:
                        out.add(read.base.label.name)
    return out


def _data(i: sp.Expr, g: Graph) -> bool:
    """Whether the subscript ``i`` reads an index tensor."""
    return any(r.base.label.name in g.tensors for r in i.atoms(sp.Indexed))


def _symbols(e: sp.Expr, g: Graph) -> set[sp.Symbol]:
    """The index symbols ``e`` reads, in subscripts too (SymPy's free symbols of
    ``targets[n]`` hold the read, its base's label and its shape's sizes)."""
    if isinstance(e, sp.Indexed):
        return set().union(*(_symbols(i, g) for i in e.indices))
    if isinstance(e, sp.Symbol):
        return {e} if e.is_integer and e not in g.sizes and e not in g.params else set()
    return set().union(*(_symbols(a, g) for a in e.args))


def _plain(indices: tuple) -> set[sp.Symbol]:
    return {i for i in indices if isinstance(i, sp.Symbol)}


def _contracts(step: Definition, g: Graph) -> bool:
    """Whether the body sums a product of two tensor reads in a matmul's shape: over an index
    they share, each with an index of its own (``x[v, f] W[f, k, d]``). A product of reads
    over the same indices summed (``keep[n, k] exp(x[n, k] - m[n])``, a masked softmax's
    normaliser) is a reduction of one elementwise tensor, and collapsing through it is what
    makes the softmax's closed form."""
    for total in step.body.atoms(sp.Sum):
        summed = {lim[0] for lim in total.limits}
        for term in sp.Add.make_args(sp.expand_mul(total.function)):  # q (k + R): q k, q R
            factors = [_indices(f, g) for f in sp.Mul.make_args(term)]
            for a, b in itertools.combinations([f for f in factors if f], 2):
                if a & b & summed and a - b and b - a:
                    return True
    return False


def _indices(f: sp.Expr, g: Graph) -> set[sp.Symbol]:
    """The index symbols of the float tensor reads in ``f``."""
    floats = (r for r in f.atoms(sp.Indexed) if not g.tensors[r.base.label.name].integer)
    return set().union(*(_symbols(r, g) for r in floats if r.base.label.name in g.tensors))
