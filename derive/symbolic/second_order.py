"""Second order, derived: the backward itself as an op, differentiated by the same engine.

Autograd differentiating the first backward's torch lines would treat every saved intermediate
(a tanh, probs, xhat, rstd) as a constant, and only a saved *output* as connected: wrong numbers
for a gradient penalty or a Hessian-vector product. So the double backward is derived. With the
first backward ``b(x, g)`` (its adjoints, as the derivation simplified them) and cotangents
``v_x`` for each float input x, the op

    pair = sum_x Sum(v_x[I] * b_x[I], I)        (b_x[I] = dx[I], defined from x and g)

is a function of the inputs, ``g`` (grad_out) and the ``v``; its gradient with respect to the
inputs and ``g`` is reverse over reverse, ``d<v, b(x, g)>/d(x, g)``, exactly what autograd asks
of a double backward. Its graph is the forward's definitions (so saved intermediates are
functions of the inputs again), then the first backward's adjoints as definitions (each
contraction nested in one of their sums a definition of its own: :meth:`_Builder._named`),
then ``pair``; :func:`~derive.symbolic.derivation.derive` derives and simplifies it as any op.

An argmax the first backward reads (a Max's adjoint routes to it) is piecewise constant in the
inputs: it enters as an int64 input, its derivative zero wherever it is defined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sympy as sp

from derive.language import Definition, Graph, Op, Tensor, View
from derive.language.graph import may_be_infinite
from derive.names import gradient_name
from derive.symbolic.derivation import Derivation
from derive.symbolic.indices import bound_by_depth, free_indices, has_reduction
from derive.symbolic.reverse import GRAD_OUT
from derive.symbolic.simplify import polynomial


@dataclass(frozen=True)
class SecondOrder:
    """The op ``pair`` and how its inputs line up with the first backward's."""

    graph: Graph  # inputs: the op's, then grad_out, a cotangent v_x per float input, argmaxes
    argmaxes: dict[str, str]  # argmax tensor the first backward reads -> its input name
    cotangents: list[str]  # the v_x inputs, in the order of the inputs they belong to


class TensorNames:
    """Names for the new tensors that clash with nothing, adjoint names (d<name>) included."""

    def __init__(self, g: Graph) -> None:
        self.taken = set(g.tensors) | {str(s) for s in [*g.sizes, *g.params]}

    def __call__(self, stem: str) -> str:
        name, k = stem, 0
        while self._clashes(name):
            k += 1
            name = f"{stem}{k}"
        self.taken.add(name)
        return name

    def _clashes(self, name: str) -> bool:
        return (
            name in self.taken
            or gradient_name(name) in self.taken
            or any(gradient_name(t) == name for t in self.taken)
            or name == GRAD_OUT
        )


def _constant_or_read(e: sp.Expr, tensors: Mapping[str, Tensor]) -> bool:
    """A tensor read (a 0-d tensor's whole), a number, size or param, or a power of sizes and
    params (``sqrt(D)``, ``1/alpha``): what a named contraction's polynomial is made of."""
    if isinstance(e, (sp.Indexed, sp.Symbol)) or not e.free_symbols:
        return True
    if isinstance(e, sp.Pow):
        return not e.base.atoms(sp.Indexed) and all(str(s) not in tensors for s in e.free_symbols)
    return False


def _first_read(e: sp.Expr) -> list[sp.Symbol]:
    """The symbols of ``e`` in the order a walk of it meets them (SymPy's order of a product's
    factors: by the tensors' names, not the indices')."""
    return list(dict.fromkeys(s for s in sp.preorder_traversal(e) if isinstance(s, sp.Symbol)))


def _read(t: Tensor) -> sp.Basic:
    return t.base if t.dims else t.whole


def _grad_out_symbol(g: Graph) -> sp.Basic:
    dims = g.tensors[g.output].dims
    return (
        sp.IndexedBase(GRAD_OUT, shape=dims, real=True) if dims else sp.Symbol(GRAD_OUT, real=True)
    )


def second_order_graph(d: Derivation) -> SecondOrder:
    """The op ``pair`` of the module docstring, built from ``d``'s forward and simplified
    adjoints (a Graph, not text: the adjoints hold deltas and argmax picks no op may write)."""
    g, adj = d.graph, d.adjoints
    b = _Builder(d, TensorNames(g))
    b.fresh.taken.update(adj.names.values())
    out = g.tensors[g.output]
    gy = b.add(Tensor(b.fresh("grad_y"), out.dims, batched=out.batched), _grad_out_symbol(g))
    b.inputs.append(gy.name)
    argmaxes = {}
    for am in adj.argmax.values():
        if am.name in d.saved:  # piecewise constant in the inputs: an int input here
            new = Tensor(b.fresh(f"{am.name}_first"), am.dims, integer=True)
            argmaxes[am.name] = b.add(new, am.base if am.dims else sp.Symbol(am.name)).name
    b.first_backward(gy.name)
    terms, cotangents = [], []
    for t in (t for t in g.inputs if t in d.final):
        x = g.tensors[t]
        v = b.add(Tensor(b.fresh(f"v_{t}"), x.dims, batched=x.batched))
        b.inputs.append(v.name)
        cotangents.append(v.name)
        free, first = adj.free[t], b.firsts[adj.names[t]]
        term = _read(v)[free] * _read(first)[free] if free else _read(v) * _read(first)
        limits = [(i, 0, n - 1) for i, n in zip(free, x.dims, strict=True)]
        terms.append(sp.Sum(term, *limits) if limits else term)
    pair = b.add(Tensor(b.fresh("pair"), ()))
    b.steps.append(Definition(pair.name, (), sp.Add(*terms), f"{pair.name} = <v, backward>"))
    op = Op(
        name=g.op.name,
        inputs=list(g.op.inputs),
        definitions=list(g.op.definitions),
        params=dict(g.op.params),
        sizes=dict(g.op.sizes),
        doc=f"the double backward of {g.op.name}",
        source=g.op.source,
        # step by step: each adjoint of the first backward is a definition of its own, read by
        # name (a view of one is a view of an intermediate); collapsing the whole second order
        # through them was slow (30 s and more for fuzzed ops) and read 0 * inf (fuzz 1022)
        stepwise=True,
    )
    inputs = b.inputs + list(argmaxes.values())
    graph = Graph(op, g.sizes, g.params, b.tensors, inputs, b.steps, pair.name, dict(g.derived))
    graph.like = gy.name
    graph.constants = frozenset(cotangents)
    graph.gradient_only = True
    graph.sums = g.sums  # the forward's text: its sums are added as written here too
    graph.logs = g.logs  # and its logs put back in their exps
    return SecondOrder(graph, argmaxes, cotangents)


class _Builder:
    """The second-order graph as it grows: its tensors and steps, and the renaming of the
    first backward's names (grad_out, its adjoints, argmaxes, reverse views) to this graph's."""

    def __init__(self, d: Derivation, fresh: TensorNames) -> None:
        self.d, self.fresh = d, fresh
        self.tensors = dict(d.graph.tensors)
        self.inputs = list(d.graph.inputs)
        self.steps: list[Definition | View] = list(d.graph.steps)  # the forward, as derived
        self.rename: dict[sp.Basic, sp.Basic] = {}
        self.firsts: dict[str, Tensor] = {}  # the first backward's adjoint name -> its tensor
        self.contractions: dict[sp.Expr, str] = {}  # a named sum, its free indices slotted
        self.reads: dict[str, set[str]] = {}  # a named sum's name -> the tensors it reads

    def add(self, t: Tensor, replaces: sp.Basic | None = None) -> Tensor:
        self.tensors[t.name] = t
        if replaces is not None:
            self.rename[replaces] = _read(t)
        return t

    def first_backward(self, grad_y: str) -> None:
        """Each adjoint of the first backward as a definition (consumers first, as derived),
        each reverse view of one (or of grad_out, where the output is a view) as a view."""
        d, adj = self.d, self.d.adjoints
        self._views(GRAD_OUT, grad_y)
        for t in d.order:
            dims, batched = d.graph.tensors[t].dims, d.graph.tensors[t].batched
            first = Tensor(self.fresh(f"b_{adj.names[t]}"), dims, batched=batched)
            self.firsts[adj.names[t]] = self.add(first, _read(Tensor(adj.names[t], dims)))
        for t in d.order:
            first = self.firsts[adj.names[t]]
            scope = {i: (0, n - 1) for i, n in zip(adj.free[t], first.dims, strict=True)}
            body = self._named(d.final[t].xreplace(self.rename), scope, top=True)
            text = f"{first.name}[{', '.join(map(str, adj.free[t]))}] = {body}"
            self.steps.append(Definition(first.name, adj.free[t], body, text))
            self._views(adj.names[t], first.name)

    def _named(self, e: sp.Expr, scope: dict[sp.Symbol, tuple], top: bool) -> sp.Expr:
        """``e`` with each contraction nested in a sum (a Sum of a polynomial in tensor reads)
        read from a definition of its own, the same one wherever it recurs.

        The first backward's adjoints nest contractions (attention's dx sums Wh against a sum
        over t1 of probs against a sum over c1 of Woh grad_out): as one definition, the second
        order's adjoint of probs through it is a product over every index of the nest, summed
        last (six-axis temporaries); through named steps each adjoint is one contraction, as
        autograd's through the torch lines. Only polynomials in reads are named: the step
        computes the very sum the nest computes, no function's range is split across it."""
        if not isinstance(e, sp.Basic) or not e.args or not has_reduction(e):
            return e
        if not isinstance(e, sp.Sum):
            return e.func(*[self._named(a, scope, top) for a in e.args])
        inner = {**scope, **{v: (lo, hi) for v, lo, hi in e.limits}}
        e = e.func(self._named(e.function, inner, top=False), *e.limits)
        if top or not polynomial(e.function, lambda f: _constant_or_read(f, self.tensors)):
            return e
        # its axes in the order the sum reads them (so the same sum in another nest is the
        # same tensor), each from 0 to a size: no triangular sum's (t2 <= t1), no offset one's
        free = [i for i in _first_read(bound_by_depth(e)) if i in free_indices(e)]
        if not free or any(scope[i][0] != 0 or free_indices(scope[i][1]) for i in free):
            return e
        return self._contraction(e, tuple(free), tuple(scope[i][1] + 1 for i in free))

    def _contraction(self, e: sp.Sum, free: tuple, dims: tuple) -> sp.Expr:
        """The read of the definition ``name[free] = e`` (one per sum, up to index names),
        named after the tensors it reads, through the contractions it reads."""
        slots = tuple(sp.Symbol(f"_slot{k}", integer=True) for k in range(len(free)))
        key = bound_by_depth(e).xreplace(dict(zip(free, slots, strict=True)))
        name = self.contractions.get(key)
        if name is None:
            read = set()
            for i in e.atoms(sp.Indexed):
                read |= self.reads.get(i.base.label.name, {i.base.label.name})
            unbounded = may_be_infinite(e, self.tensors)
            stem = "_".join(["c", *sorted(read)])
            t = self.add(Tensor(self.fresh(stem), dims, unbounded=unbounded))
            text = f"{t.name}[{', '.join(map(str, free))}] = {e}"
            self.steps.append(Definition(t.name, free, e, text))
            name = self.contractions[key] = t.name
            self.reads[name] = read
        return self.tensors[name].base[free]

    def _views(self, dname: str, name: str) -> None:
        """dW_as_Wqkv, the reverse view of dW (named ``name`` here): a reshape of it."""
        adj = self.d.adjoints
        for view, (viewed, src) in sorted(adj.views.items()):
            if viewed == dname:
                dims = self.d.graph.tensors[src].dims
                shaped = Tensor(self.fresh(f"b_{view}"), dims)
                self.add(shaped, sp.IndexedBase(view, shape=dims, real=True))
                self.steps.append(View(shaped.name, name, f"{shaped.name} = view({name})"))
