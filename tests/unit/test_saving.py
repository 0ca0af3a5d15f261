"""The saved set's cost model (derive/saving.py): one op in, the lifted or saved names out."""

from __future__ import annotations

import sympy as sp

from derive import Op
from derive.functions import FUNCTIONS
from derive.language import parse
from derive.symbolic.canon import Pattern, fold
from derive.symbolic.derivation import derive
from derive.symbolic.saving import SAVE_COST, lift_saved_calls, weight


def _op(*definitions: str, stepwise: bool = False) -> Op:
    return Op(name="t", inputs=["x[N, C]"], definitions=list(definitions), stepwise=stepwise)


def _steps(g) -> list[str]:
    return [s.name for s in g.steps]


def test_weights_are_the_registry_rows() -> None:
    x = sp.Symbol("x", real=True)
    assert weight(sp.tanh(x)) == FUNCTIONS["tanh"].weight > SAVE_COST
    assert weight(sp.Abs(x)) == FUNCTIONS["abs"].weight <= SAVE_COST
    assert weight(sp.sqrt(x)) > SAVE_COST  # a root is a Pow with exponent 1/2
    assert weight(x**2) == 0  # an integer power is arithmetic


def test_a_costly_call_inside_a_definition_is_lifted() -> None:
    # out = x tanh(x)  ->  out_tanh0 = tanh(x), out = x out_tanh0
    g = lift_saved_calls(parse(_op("out[n, c] = x[n, c] * tanh(x[n, c])")))
    assert _steps(g) == ["out_tanh0", "out"]
    assert g.steps[0].body == sp.tanh(g.tensors["x"].base[g.steps[0].indices])


def test_cheap_calls_the_whole_body_and_stepwise_ops_are_left_alone() -> None:
    for op in [
        _op("out[n, c] = x[n, c] * abs(x[n, c])"),  # abs: recomputing costs a multiply
        _op("out[n, c] = tanh(x[n, c])"),  # already named: out
        _op("out[n, c] = x[n, c] * tanh(x[n, c])", stepwise=True),  # every step is the author's
    ]:
        g = parse(op)
        assert lift_saved_calls(g) is g


def test_a_call_under_a_sum_is_lifted_with_the_summed_index() -> None:
    g = lift_saved_calls(parse(_op("s[n] = Sum(exp(x[n, c]), c)")))
    assert _steps(g) == ["s_exp0", "s"]
    assert [str(i) for i in g.steps[0].indices] == ["n", "c"]


def test_the_backward_reads_the_saved_call_instead_of_recomputing_it() -> None:
    d = derive(parse(_op("out[n, c] = x[n, c] * tanh(x[n, c])")))
    assert d.saved == ["x", "out_tanh0"]
    assert not d.final["x"].has(sp.tanh)  # d/dx x tanh x = tanh x + x (1 - tanh**2 x)
    assert _steps(d.written) == ["out"]  # show and the formulas page present what was written


def test_a_lifted_call_the_backward_does_not_read_goes_back() -> None:
    # d/dx (x + log(s)) reads 1/s and the softmax, never log(s): the forward stays as written
    op = _op("s[n] = Sum(x[n, c]**2, c)", "out[n, c] = x[n, c] + log(s[n])")
    d = derive(parse(op))
    assert "out_log0" not in d.saved
    assert _steps(d.graph) == ["s", "out"] and d.graph.steps[1].body.has(sp.log)


def test_fold_reads_a_call_whose_argument_the_simplifier_factored() -> None:
    # tanh(x + c x**3) saved; the backward's tanh(x (1 + c x**2)) is the same call
    x = sp.Symbol("x", real=True)
    t = sp.Symbol("t", real=True)
    pattern = Pattern("t", t, (), sp.tanh(x + x**3 / 7))
    assert fold(1 - sp.tanh(x * (1 + x**2 / 7)) ** 2, [pattern]) == 1 - t**2


def test_catalogue_backwards_compute_no_saved_transcendental_again() -> None:
    # GELU's tanh / erf are computed once, in the forward; the backward reads them back
    import inspect

    from generated import gelu, gelu_tanh, logsumexp

    assert "torch.tanh" not in inspect.getsource(gelu_tanh.backward)
    assert "torch.erf" not in inspect.getsource(gelu.backward)
    assert "torch.exp" not in inspect.getsource(logsumexp.backward)


def test_a_call_along_an_element_wise_chain_stays_inline() -> None:
    # a1 * tanh(a1): lifting at every link of a chain multiplied the simplifier's work
    g = parse(_op("a1[n, c] = 2 * x[n, c]", "out[n, c] = a1[n, c] * tanh(a1[n, c])"))
    assert lift_saved_calls(g) is g


def test_fold_compares_a_where_condition_without_arithmetic() -> None:
    # where(r >= h, ...) against where(h >= r, ...): conditions have no difference to expand
    from derive.symbolic.canon import _same_call

    r, h = sp.symbols("r h", integer=True)
    a = sp.Symbol("a", real=True)
    where = FUNCTIONS["where"].make
    assert not _same_call(where(r >= h, a, 0), where(h >= r, a, 0))
    assert _same_call(where(r >= h, a * (1 + a), 0), where(r >= h, a + a**2, 0))


def test_a_pattern_whose_indices_no_single_read_binds_folds() -> None:
    # h[n, c] = tanh(x[n] + y[c]): x binds n, y binds c; the instance needs both (a join)
    n, c, k, m = sp.symbols("n c k m", integer=True)
    x, y, h = sp.IndexedBase("x"), sp.IndexedBase("y"), sp.IndexedBase("h")
    pattern = Pattern("h", h, (n, c), sp.tanh(x[n] + y[c]))
    assert fold(1 - sp.tanh(x[k] + y[m]) ** 2, [pattern]) == 1 - h[k, m] ** 2
    # and through a gather's subscript: labels[n] against labels[m] binds n = m
    labels, s, g = sp.IndexedBase("labels"), sp.IndexedBase("s"), sp.IndexedBase("g")
    gather = Pattern("g", g, (k, n), sp.exp(s[k, labels[n]]))
    assert fold(3 * sp.exp(s[c, labels[m]]), [gather]) == 3 * g[c, m]


def test_the_backward_reads_an_outer_product_intermediate() -> None:
    op = Op(
        name="t",
        inputs=["x[N]", "y[C]"],
        definitions=["h[n, c] = tanh(x[n] + y[c])", "out[n] = Sum(h[n, c]**2, c)"],
    )
    d = derive(parse(op))
    assert "h" in d.saved and not any(e.has(sp.tanh) for e in d.final.values())


def test_a_call_on_a_guarded_pick_stays_under_its_guard() -> None:
    # where(t[n] != -1, log(p[n, t[n]]), 0): lifted, log(p[n, t[n]]) read every ignored -1
    # unguarded, and the module refused each as outside the axis
    op = Op(
        name="t",
        inputs=["p[N, C]", "t[N]: int64"],
        definitions=["out = Sum(where(t[n] != -1, log(p[n, t[n]]), 0), n)"],
    )
    assert _steps(lift_saved_calls(parse(op))) == ["out"]


def test_the_forward_computes_only_what_its_stabilised_steps_read() -> None:
    # the loss reads p only through log(p[n, y[n]]), which the forward's rules rewrite to
    # x - m - log(Sum(e)): p, an N x C tensor, was computed and never read
    op = Op(
        name="t",
        inputs=["x[N, C]", "y[N]: int64"],
        definitions=[
            "m[n] = Max(x[n, c], c)",
            "e[n, c] = exp(x[n, c] - m[n])",
            "p[n, c] = e[n, c] / Sum(e[n, c2], c2)",
            "loss = -Sum((1 - p[n, y[n]])**2 * log(p[n, y[n]]), n) / N",
        ],
    )
    assert [s.name for s in derive(parse(op)).forward] == ["m", "e", "loss"]
