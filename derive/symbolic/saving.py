"""What the forward keeps for the backward: save or recompute, by a stated cost.

Named intermediates are saved whenever the backward reads them (the fold expresses adjoints
through them; see :mod:`derive.symbolic.canon`). A call *inside* a definition (``tanh`` in
``0.5*x*(1 + tanh(u))``, ``softplus`` in Mish's ``x*tanh(softplus(x))``) has no name, so the
backward would compute it again. The cost model decides, per call, one function row at a time:

    recompute: weight(f) passes over the tensor   (FUNCTIONS[f].weight, measured; a multiply is 1)
    save:      SAVE_COST passes (the forward writes it once more, the backward reads it once)

A call whose weight exceeds SAVE_COST (exp, log, tanh, erf, sigmoid, softplus, a root: 5 to 40)
is lifted into a definition of its own before reverse mode, ``<name>_<f><k>[...] = f(...)``, so
the ordinary fold reads it from the forward; cheap ones (abs, sign, relu: about 1) stay inline
and are recomputed. A contraction inside a definition (``Sum(x[n, d] * W[d, f], d)``, a
squared distance: a matmul's work per entry) is lifted the same way where the backward needs
its value: under a call (``relu(..)``'s mask), beside another tensor's factor; with the other
terms of a call's argument (``relu(Sum(..) + b)``: the pre-activation, whole). Not where it
enters linearly (the backward reads only the definition there), nor where a sum around it
contracts it away without making it.

A call on an element-wise intermediate (``tanh(a1)`` in ``a1 * tanh(a1)``) stays inline too:
the canonical forms inline such chains, and a lifted call at every link multiplied the
simplifier's work along them (a 12-link chain: 0.5 s -> 51 s). So does a call that picks
through a guarded index, ``log(p[n, t[n]])`` in ``where(t[n] != -1, .., 0)``: a definition
of its own would read the entries the where() ignores, and the module then refused every
ignored -1 as outside the axis (found writing a focal loss with an ignore_index).

After the derivation, a lifted call the backward does not read is put back into its
definition (:func:`unlift`): the forward computes exactly what the op wrote, and saves only
what the backward needs. Stepwise ops are left alone: their backward returns the
gradient of every named step, and a lifted name is not one the author wrote.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from derive.functions import BY_NODE, FUNCTIONS, where
from derive.language import BATCH_INDEX, Definition, Graph, ReduceMax, Tensor, View, tensor_reads
from derive.language.guards import guard_of
from derive.language.logs import logged_factors, logged_key
from derive.language.ranges import range_of, subscript_ranges
from derive.symbolic.indices import is_reduction

SAVE_COST = 2  # one more pass to write the tensor in the forward, one to read it back
# x**p for a non-integer p: the sqrt row, whose SymPy form is such a power (no node of its own)
POWER_WEIGHT = FUNCTIONS["sqrt"].weight


def weight(call: sp.Basic) -> int:
    """Per-element cost of computing ``call`` again, in multiplies (0: not a call we weigh)."""
    if isinstance(call, sp.Pow):
        return 0 if call.exp.is_integer else POWER_WEIGHT
    row = BY_NODE.get(type(call))
    return row.weight if row is not None else 0


def lift_saved_calls(g: Graph) -> Graph:
    """``g`` with every costly call inside a definition lifted into a definition of its own."""
    if g.op.stepwise:
        return g
    tensors, steps = dict(g.tensors), []
    chained = {s.name for s in g.steps if isinstance(s, Definition) and not is_reduction(s.body)}
    logged: dict[sp.Expr, list[frozenset[str]]] = {}
    for u, reads in g.logs:
        logged.setdefault(logged_key(u), []).append(reads)
    for step in g.steps:
        if isinstance(step, Definition):
            steps.extend(_lifted(step, tensors, set(g.sizes), chained, logged))
        else:
            steps.append(step)
    if len(steps) == len(g.steps):
        return g
    return dataclasses.replace(g, tensors=tensors, steps=steps)  # sizes derived and all


def _lifted(
    step: Definition,
    tensors: dict[str, Tensor],
    sizes: set,
    chained: set[str],
    logged: dict | None = None,
) -> list[Definition]:
    lifted: list[Definition] = []
    # ranges of the indices a lifted call may read only through an affine subscript (t of
    # tanh(x[n, t - 1])): the definition's own axes, its sums' and its Max's
    reductions = step.body.atoms(sp.Sum, ReduceMax)
    known = {v: hi - lo + 1 for s in reductions for v, lo, hi in s.limits}
    known.update(zip(step.indices, tensors[step.name].dims))

    def lift(
        e: sp.Basic,
        top: bool,
        guarded: frozenset = frozenset(),
        beside: bool = False,
        linear: bool = True,
        summed: frozenset = frozenset(),
    ) -> sp.Basic:
        if not isinstance(e, sp.Basic) or not e.args or isinstance(e, (sp.Indexed, sp.Tuple)):
            return e
        guards = (None,) * len(e.args)
        if isinstance(e, where):  # the condition reads the data itself, as it is
            guards = (None, *guard_of(e.args[0]))
        # an exp beside a factor the text logged in it stays there, and so does the factor
        # (sigmoid(z) of exp(x + log(sigmoid(z)))): the lowering takes the factor back in,
        # exp(a + log(u)) (derive.language.logs), which a name for either would hide
        exps = [f for f in e.args if isinstance(f, sp.exp)] if isinstance(e, sp.Mul) else []
        taken = {f for f, _ in logged_factors(e, logged or {}, None)} if exps else set()
        kept = set(exps) | taken if taken else set()  # neither hidden behind a name
        args = tuple(
            lift(
                a,
                False,
                guarded | {guard[0]} if guard is not None else guarded,
                a in kept,
                # a term of a sum of terms: the sum is named as a whole where it is needed
                (linear or isinstance(e, sp.Add)) and _enters_linearly(e, a, tensors),
                _summed_around(e, summed),
            )
            for a, guard in zip(e.args, guards, strict=True)
        )
        if args != e.args:
            e = e.func(*args)
        free = _free_indices(e, sizes, step.indices)
        contraction = _contraction(e, tensors)
        # a contraction is worth a name where its value is needed and made: not entering
        # linearly, and not contracted away by a sum around it
        needed = contraction and not linear and not set(free) & summed
        along_chain = not contraction and tensor_reads(e, tensors) & chained
        if top or beside or not (needed or weight(e) > SAVE_COST) or not free or along_chain:
            return e  # the whole body (already named), cheap, a number, or along a chain
        if guarded & _subscripts(e):
            return e  # a guarded pick: its own definition would read the ignored entries
        name = _fresh(f"{step.name}_{_call_name(e)}", tensors)
        batched = free[0] == BATCH_INDEX  # the flattened ``...`` axis leads, as in inputs
        plain = subscript_ranges(e)
        dims = tuple(range_of(i, e) if i in plain else known[i] for i in free)
        tensors[name] = Tensor(name, dims, batched=batched)
        lifted.append(Definition(name, free, e, f"{name}[...] = {e}  (from `{step.text}`)"))
        return tensors[name].base[free]

    body = lift(step.body, True)
    if not lifted:
        return [step]
    return [*lifted, Definition(step.name, step.indices, body, step.text)]


def _subscripts(e: sp.Basic) -> set[sp.Indexed]:
    """The int entries ``e`` reads as subscripts (``t[n]`` of ``x[n, t[n]]``)."""
    return {i for x in e.atoms(sp.Indexed) for i in x.indices if isinstance(i, sp.Indexed)}


def _contraction(e: sp.Basic, tensors: dict[str, Tensor]) -> bool:
    """A sum whose summed index two float reads share (``Sum(x[n, d] * W[d, f], d)``, a
    squared distance): computing it again is a matmul's work per entry, not a pass. Also a
    sum of terms holding one (``Sum(x W) + b``, a pre-activation): named as a whole, the
    forward keeps its ``addmm`` and the backward reads it without adding the bias again."""
    if isinstance(e, sp.Add):
        return any(
            _contraction(f, tensors)
            for t in e.args
            for f in sp.Mul.make_args(t)
            if all(not tensor_reads(g, tensors) for g in sp.Mul.make_args(t) if g is not f)
        )
    if not isinstance(e, sp.Sum):
        return False
    bound = {lim[0] for lim in e.limits}
    reads = {
        r
        for r in e.function.atoms(sp.Indexed)
        if not tensors[r.base.label.name].integer and r.free_symbols & bound
    }
    return len({r.base for r in reads}) >= 2 or len(reads) >= 2


def _enters_linearly(e: sp.Basic, a: sp.Basic, tensors: dict[str, Tensor]) -> bool:
    """Whether ``e`` is linear in its argument ``a`` (a term, a factor beside numbers, sizes,
    params and normalisers, a branch): the backward then reads no value of ``a`` but the
    definition's, so a sum there is not worth a name (``Sum(x[n, d] * W[d, f], d) + b[f]``)."""
    if isinstance(e, (sp.Add, sp.Sum)):
        return True
    if isinstance(e, sp.Mul):
        return all(not tensor_reads(f, tensors) or _normaliser(f) for f in e.args if f is not a)
    if isinstance(e, where):
        return a is not e.args[0]
    return False


def _summed_around(e: sp.Basic, summed: frozenset) -> frozenset:
    """The indices summed around ``e``'s arguments up to the nearest call: a sum over one of a
    contraction's own axes may contract it away without making it (``Sum_{b,c} g[b, c] Sum_d
    W[e, d] P[b, c, d]``: g with P first, never the E x B x C sum), a call makes its argument."""
    if isinstance(e, sp.Sum):
        return summed | {lim[0] for lim in e.limits}
    if isinstance(e, (sp.Add, sp.Mul, where)):
        return summed
    return frozenset()


def _normaliser(f: sp.Basic) -> bool:
    """``1 / Sum(..)``: a sum over it is the definition's own value (a softmax-weighted sum),
    which the backward reads by that name."""
    return isinstance(f, sp.Pow) and f.exp.is_negative and isinstance(f.base, sp.Sum)


def _free_indices(
    e: sp.Basic, sizes: set, outer: tuple[sp.Symbol, ...] = ()
) -> tuple[sp.Symbol, ...]:
    """e's free indices in the order the tensors it reads subscript them (x[n, c] -> n, c), so
    the lifted tensor's axes follow its operands' and its lowering needs no permute; over a
    sum, whose operands SymPy orders by name (``W1[d, f] * x[n, d]``), first in the order of
    the definition's own indices (``outer``), so the definition reads it as laid out."""
    labels = {i.base.label for i in e.atoms(sp.Indexed)}
    free = {x for x in e.free_symbols if isinstance(x, sp.Symbol) and x.is_integer}
    free -= sizes | labels
    order: list[sp.Symbol] = [BATCH_INDEX] if BATCH_INDEX in free else []
    if e.has(sp.Sum):  # a contraction's layout is free: the one its reader reads
        order += [i for i in outer if i in free and i not in order]
    for node in sp.preorder_traversal(e):
        if isinstance(node, sp.Indexed):
            for i in node.indices:  # one at a time: a diagonal x[n, n] names n once
                if i in free and i not in order:
                    order.append(i)
    return tuple(order) + tuple(sorted(free - set(order), key=str))


def _call_name(e: sp.Basic) -> str:
    if isinstance(e, sp.Pow):
        return "pow"
    if isinstance(e, sp.Sum):
        return "sum"
    if isinstance(e, sp.Add):
        return "in"  # a call's argument: a pre-activation
    return BY_NODE[type(e)].name


def _fresh(stem: str, tensors: dict[str, Tensor]) -> str:
    k = 0
    while f"{stem}{k}" in tensors:
        k += 1
    return f"{stem}{k}"


def unlift(g: Graph, lifted_from: Graph, saved: set[str]) -> Graph:
    """Put back into their definitions the lifted calls the backward does not read."""
    if g is lifted_from:
        return g
    lifted = {s.name: s for s in g.steps if s.name not in lifted_from.tensors}
    back = {n: s for n, s in lifted.items() if n not in saved}
    if not back:
        return g
    steps: list[Definition | View] = []
    for step in g.steps:
        if step.name in back:
            continue
        if isinstance(step, Definition):
            step = Definition(step.name, step.indices, _put_back(step.body, back), step.text)
        steps.append(step)
    tensors = {n: t for n, t in g.tensors.items() if n not in back}
    return dataclasses.replace(g, tensors=tensors, steps=steps)


def _put_back(body: sp.Expr, back: dict[str, Definition]) -> sp.Expr:
    def at(e: sp.Indexed) -> sp.Expr:
        d = back[e.base.label.name]
        inner = d.body.xreplace(dict(zip(d.indices, e.indices, strict=True)))
        return _put_back(inner, back)

    reads = [i for i in body.atoms(sp.Indexed) if i.base.label.name in back]
    return body.xreplace({i: at(i) for i in reads}) if reads else body
