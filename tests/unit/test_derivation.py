"""The derivation's last guard (derive/symbolic/derivation.py): an adjoint that reads an index
outside its sums is refused as an engine bug, never handed to the lowering."""

from __future__ import annotations

import pytest
import sympy as sp

from derive import Op
from derive.errors import EngineBug
from derive.language import parse
from derive.symbolic.derivation import _checked, derive
from derive.symbolic.forward_mode import tangent_graph
from derive.symbolic.reverse import derive_adjoints


def test_an_adjoint_with_an_index_outside_its_sums_is_refused() -> None:
    g = parse(Op(name="t", inputs=["x[N, C]"], definitions=["y[n, c] = tanh(x[n, c])"]))
    adj = derive_adjoints(g)
    n, c = adj.free["x"]
    k = sp.Symbol("_i9", integer=True)  # what a rule that lost a Sum's limit leaves behind
    y, dy = sp.IndexedBase("y", real=True), sp.IndexedBase("grad_out", real=True)
    good = dy[n, c] * (1 - y[n, c] ** 2)
    assert _checked(g, adj, {"x": good}) == {"x": good}
    stray = r"op 't': internal error: the adjoint of x reads \['_i9'\] outside"
    with pytest.raises(EngineBug, match=stray):
        _checked(g, adj, {"x": good * y[n, k]})


@pytest.mark.parametrize("stepwise", [False, True])
def test_a_definition_the_output_does_not_read_is_not_computed(stepwise: bool) -> None:
    op = Op(
        name="t",
        inputs=["b[K]", "v[K]"],
        definitions=["a1[k] = sinh(b[k] ** 3)", "h[k] = tanh(v[k])", "u = Sum(h[k] * v[k], k)"],
        stepwise=stepwise,
    )
    d = derive(parse(op))
    assert [s.name for s in d.forward] == ["h", "u"]
    assert "a1" not in d.saved


def test_no_index_reads_as_a_tensor_or_size() -> None:
    # exercise has a tensor h over H: its adjoints' indices were h too (dW2[h, v] = Sum(dlogits[n,
    # v]*h[n, h], ...)); free and bound indices now avoid every tensor, adjoint and size name
    from derive.emit.generate import load_op

    g = parse(load_op("ops/exercise.py"))
    d = derive(g)
    names = {*g.tensors, *d.adjoints.names.values(), *(str(s) for s in g.sizes)}
    for t, e in d.final.items():
        indices = {*d.adjoints.free[t], *(lim[0] for s in e.atoms(sp.Sum) for lim in s.limits)}
        assert not {str(i) for i in indices} & names, (t, e)


@pytest.mark.parametrize("stepwise", [False, True])
def test_nothing_is_folded_onto_a_definition_the_output_does_not_read(stepwise: bool) -> None:
    # u and w hold sub-expressions of the output's body but are never read: a backward, saved
    # set or tangent folded onto them would read a name the forward does not compute
    op = Op(
        name="t",
        inputs=["x[K]", "y[J, K]"],
        definitions=[
            "u[k] = tanh(x[k])",
            "w[k, j] = y[j, k]",
            "out[j, k] = tanh(x[k]) * y[j, k] * Sum(y[i, k], i)",
        ],
        stepwise=stepwise,
    )
    d = derive(parse(op))
    computed = {"x", "y", "grad_out"} | {s.name for s in d.forward}
    assert {"u", "w"}.isdisjoint(computed)
    assert set(d.saved) <= computed
    for expr in d.final.values():
        assert {i.base.label.name for i in expr.atoms(sp.Indexed)} <= computed, expr
    tangents = tangent_graph(d)
    computed |= {"t_x", "t_y"} | {s.name for s in tangents.steps}
    for step in tangents.steps:
        assert {i.base.label.name for i in step.body.atoms(sp.Indexed)} <= computed, step.text
