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
functions of the inputs again), then the first backward's adjoints as definitions, then
``pair``; :func:`~derive.symbolic.derivation.derive` derives and simplifies it as any op.

An argmax the first backward reads (a Max's adjoint routes to it) is piecewise constant in the
inputs: it enters as an int64 input, its derivative zero wherever it is defined.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.language import Definition, Graph, Op, Tensor, View
from derive.symbolic.derivation import Derivation
from derive.symbolic.reverse import GRAD_OUT


@dataclass(frozen=True)
class SecondOrder:
    """The op ``pair`` and how its inputs line up with the first backward's."""

    graph: Graph
    grad_out: str  # the first backward's grad_out, an input here
    cotangents: dict[str, str]  # float input -> its cotangent's input name (v_x)
    argmaxes: dict[str, str]  # argmax tensor the first backward reads -> its input name


class _Names:
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
            or f"d{name}" in self.taken
            or (name.startswith("d") and name[1:] in self.taken)
            or name == GRAD_OUT
        )


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
    fresh = _Names(g)
    for name in adj.names.values():
        fresh.taken.add(name)
    tensors = dict(g.tensors)
    out = g.tensors[g.output]
    gy = Tensor(fresh("grad_y"), out.dims, batched=out.batched)
    rename: dict[sp.Basic, sp.Basic] = {_grad_out_symbol(g): _read(gy)}
    inputs = list(g.inputs) + [gy.name]
    tensors[gy.name] = gy
    argmaxes = {}
    for am in adj.argmax.values():
        if am.name in d.saved:
            new = Tensor(fresh(f"{am.name}_first"), am.dims, integer=True)
            rename[am.base if am.dims else sp.Symbol(am.name)] = _read(new)
            tensors[new.name], argmaxes[am.name] = new, new.name
    steps: list[Definition | View] = list(g.steps)
    firsts: dict[str, Tensor] = {}  # adjoint name -> its definition here
    for t in d.order:
        first = Tensor(fresh(f"b_{adj.names[t]}"), g.tensors[t].dims, batched=g.tensors[t].batched)
        rename[_read(Tensor(adj.names[t], first.dims))] = _read(first)
        firsts[adj.names[t]] = tensors[first.name] = first
    for t in d.order:
        first = firsts[adj.names[t]]
        body = d.final[t].xreplace(rename)
        text = f"{first.name}[{', '.join(map(str, adj.free[t]))}] = {body}"
        steps.append(Definition(first.name, adj.free[t], body, text))
        for view, (dname, src) in sorted(adj.views.items()):
            if dname == adj.names[t]:  # dW_as_Wqkv: the reverse view, a reshape of dW
                dims = g.tensors[src].dims
                shaped = Tensor(fresh(f"b_{view}"), dims)
                tensors[shaped.name] = shaped
                rename[sp.IndexedBase(view, shape=dims, real=True)] = shaped.base
                steps.append(View(shaped.name, first.name, f"{shaped.name} = view({first.name})"))
    cotangents, terms = {}, []
    for t in g.inputs:
        if t not in d.final:
            continue
        x = g.tensors[t]
        v = Tensor(fresh(f"v_{t}"), x.dims, batched=x.batched)
        tensors[v.name], cotangents[t] = v, v.name
        inputs.append(v.name)
        free = adj.free[t]
        term = (
            _read(v)[free] * _read(firsts[adj.names[t]])[free]
            if free
            else (_read(v) * _read(firsts[adj.names[t]]))
        )
        limits = [(i, 0, n - 1) for i, n in zip(free, x.dims, strict=True)]
        terms.append(sp.Sum(term, *limits) if limits else term)
    inputs += list(argmaxes.values())
    pair = Tensor(fresh("pair"), ())
    tensors[pair.name] = pair
    steps.append(Definition(pair.name, (), sp.Add(*terms), f"{pair.name} = <v, backward>"))
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
    graph = Graph(op, g.sizes, g.params, tensors, inputs, steps, pair.name, dict(g.derived))
    return SecondOrder(graph, gy.name, cotangents, argmaxes)
