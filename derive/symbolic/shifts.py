"""Shifts the output does not see: a maximum subtracted for range, proven to cancel.

Softmax, logsumexp and their masked, segment and graph forms subtract a maximum ``m`` inside an
exp so that no exp overflows. The output then does not depend on ``m``:

    out(m + c) = out(m)        for every c,

and m's adjoint is 0, whatever the chain rule writes for it: a sum that cancels only once the
simplifier meets the whole chain, in a form it can see. Written as graph attention aggregates,
``out[v] = Sum_e where(dst[e] == v, ex[e] / den[v] m[src[e]], 0)``, it never did: the backward
saved the argmax, scattered into it and summed what cancels, and the double backward kept an
(E, K, E) mask of it.

Proven per op, never assumed: forward mode along a tangent ``c[I]`` of m, a symbol for each
entry (every direction at once), through each definition downstream of m, every tangent
inlined into the next and simplified. Where the output's tangent is 0 the linear map from m's
tangent to the output's is 0, and so is its transpose, m's adjoint: reverse mode then passes
nothing through m (:func:`~derive.symbolic.reverse.derive_adjoints`), and forward mode gives m
no tangent. The chain rule's value is the same (up to rounding: autograd's too sums what
cancels); where it is not proven, nothing changes. A collapsed op's backward and tangents
only: :func:`~derive.symbolic.derivation.derive` says why a step-by-step op and the double
backward keep the chain rule's max path.

The proof reads its expressions in forms of its own, never emitted: ``where(c, x, 0)`` as
``where(c, 1, 0) x`` (equal wherever x is finite: the proof concerns the tangent as a
function, not a value the module computes), and under an equality ``where(a == b, 1, 0)``
every other factor of its product or sum reads b where it read a (the data side read at the
index side): ``c[dst[e]]`` beside ``where(dst[e] == v, 1, 0)`` is ``c[v]``, out of the sum
over e, and what is left is den's own sum.
"""

from __future__ import annotations

import sympy as sp

from derive.functions import where
from derive.language import Definition, Graph, ReduceMax, Tensor, View, tensor_reads
from derive.symbolic.indices import Fresh, bound_indices, freshen_bound
from derive.symbolic.reverse import live_tensors, square_tensors
from derive.symbolic.simplify import Simplifier
from derive.symbolic.tangent import Tangent, read

PROOF_SIZE = 4000  # operations in one tangent past which the proof gives up: not proven


class _Fresh(Fresh):
    """Bound names of the proof's own (``_p0``, ``_p1``, ..): never one a body already binds."""

    def __call__(self) -> sp.Symbol:
        return sp.Symbol(f"_p{next(self._count)}", integer=True)


def unseen_shifts(g: Graph) -> frozenset[str]:
    """The Max definitions of ``g`` the output is proven not to see (module docstring)."""
    live = live_tensors(g)
    return frozenset(
        step.name
        for step in g.steps
        if isinstance(step, Definition)
        and isinstance(step.body, ReduceMax)
        and step.name in live
        and step.name != g.output
        and _unseen(g, step)
    )


def _unseen(g: Graph, top: Definition) -> bool:
    """Whether the output's tangent along any tangent of ``top`` simplifies to 0."""
    after = g.steps[g.steps.index(top) + 1 :]
    downstream = {top.name}
    for step in after:
        source = {step.source} if isinstance(step, View) else tensor_reads(step.body, g.tensors)
        if source & downstream:
            downstream.add(step.name)
    bodies = {
        s.name: (s.indices, s.body)
        for s in after
        if isinstance(s, Definition) and s.name in downstream and not isinstance(s.body, ReduceMax)
    }
    shift = Tensor(f"_c_{top.name}", g.tensors[top.name].dims)
    tangents = {top.name: (top.indices, read(shift, top.indices))}
    fresh, simplifier, squares = _Fresh(), Simplifier(), square_tensors(g)
    for step in after:
        if step.name not in downstream:
            continue
        if isinstance(step, View):
            if step.source in tangents:
                return False  # a view of it: not followed
            continue
        if not tensor_reads(step.body, g.tensors) & tangents.keys():
            continue  # reads only tensors whose tangent is 0
        if isinstance(step.body, ReduceMax):
            return False  # a maximum of it: not followed
        names = {t: Tensor(f"_t_{t}", g.tensors[t].dims) for t in tangents}
        raw = Tangent(g.op.name, step.text, names, None, squares)(step.body)
        tangent = _inlined(raw, names, tangents, bodies, fresh)
        if tangent is None:
            return False
        for _ in range(2):
            tangent = simplifier.simplify(_proof_form(tangent))
        if tangent == 0:
            continue
        if step.name == g.output or sp.count_ops(tangent) > PROOF_SIZE:
            return False
        tangents[step.name] = (step.indices, tangent)
    return g.output not in tangents


def _inlined(
    raw: sp.Expr,
    names: dict[str, Tensor],
    tangents: dict[str, tuple[tuple, sp.Expr]],
    bodies: dict[str, tuple[tuple, sp.Expr]],
    fresh: Fresh,
) -> sp.Expr | None:
    """``raw`` with each tangent read replaced by its expression, then every tensor downstream
    of the maximum by its body, until only tensors upstream (constants here) and m are read;
    None where that grows past :data:`PROOF_SIZE` (a long chain inlined copies its reads)."""
    by_name = {t.name: tangents[s] for s, t in names.items()}
    expr = _substituted(raw, by_name, fresh)
    while True:
        new = _substituted(expr, bodies, fresh)
        if new == expr:
            return expr
        if sp.count_ops(new) > PROOF_SIZE:
            return None
        expr = new


def _substituted(e: sp.Expr, at: dict[str, tuple[tuple, sp.Expr]], fresh: Fresh) -> sp.Expr:
    replace: dict[sp.Basic, sp.Expr] = {}
    # in sorted order: each body's bound indices are freshened in turn (fresh names, counted)
    for ind in sorted(e.atoms(sp.Indexed), key=sp.default_sort_key):
        found = at.get(ind.base.label.name)
        if found is not None:
            indices, body = found
            body = freshen_bound(body, fresh)
            replace[ind] = body.xreplace(dict(zip(indices, ind.indices, strict=True)))
    for s in sorted(e.atoms(sp.Symbol), key=sp.default_sort_key):
        found = at.get(s.name)
        if found is not None and not found[0] and not s.is_integer:
            replace[s] = freshen_bound(found[1], fresh)
    return e.xreplace(replace) if replace else e


def _proof_form(e: sp.Basic) -> sp.Basic:
    """The proof's form of ``e`` (module docstring), bottom-up."""
    if not e.args:
        return e
    args = [_proof_form(a) for a in e.args]
    e = e.func(*args) if any(n is not o for n, o in zip(args, e.args, strict=True)) else e
    if isinstance(e, where) and e.args[2] == 0 and e.args[1] != 1:
        return where(e.args[0], 1, 0) * e.args[1]
    if isinstance(e, where) and e.args[1] == 0 and e.args[2] != 1:
        return where(e.args[0], 0, 1) * e.args[2]
    if isinstance(e, sp.Mul):
        new = _read_across(e, sp.Mul.make_args(e), lambda a, b: isinstance(b, sp.Symbol))
        return e if new is e else _proof_form(new)
    if isinstance(e, sp.Sum):
        for k, *_ in e.limits:
            body = _read_across(
                e.function,
                sp.Mul.make_args(e.function),
                lambda a, b, k=k: a.has(k) and not b.has(k),
            )
            if body is not e.function:
                return _proof_form(sp.Sum(body, *e.limits))
    return e


def _read_across(e: sp.Expr, factors: tuple, which) -> sp.Expr:
    """The product of ``factors`` with the first equality ``where(a == b, 1, 0)`` among them
    (a an int read, ``which(a, b)``) read across: a -> b in every other factor."""
    for f in factors:
        if not (isinstance(f, where) and isinstance(f.args[0], sp.Eq) and f.args[1:] == (1, 0)):
            continue
        for a, b in (f.args[0].args, f.args[0].args[::-1]):
            if not (isinstance(a, sp.Indexed) and which(a, b)):
                continue
            others = [h for h in factors if h is not f]
            if any(bound_indices(h) & (a.free_symbols | b.free_symbols) for h in others):
                continue  # a sum inside binds an index of a or b: another a, or b captured
            new = sp.Mul(f, *[h.xreplace({a: b}) for h in others])
            if new != e:
                return new
    return e
