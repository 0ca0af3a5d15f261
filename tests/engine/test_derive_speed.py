"""Derivation work grows polynomially with the length of a chain (issue 9, item 7).

Speed itself is measured, not unit-tested (README, bench/): these tests assert structure that
exponential growth would break. A chain of n element-wise definitions has an adjoint whose
expanded product has 2**n terms; the simplifier must neither build those terms nor walk a
shared subtree once per occurrence, so the distinct sub-expressions it visits and the size of
what it derives grow at most quadratically in n.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

import derive.explain.explain as explain_module
from derive.emit.generate import emit
from derive.language import Op, parse
from derive.symbolic.cost import cost
from derive.symbolic.derivation import derive
from derive.symbolic.indices import Fresh, freshen_bound, substitute
from derive.symbolic.simplify import EXPAND_TERMS, expanded_terms

FUNCTIONS = ("exp", "sin", "cos")


def _chain(n: int, mixed: bool | str) -> Op:
    """a1 = tanh(x), a2 = tanh(a1), ...; mixed: exp/sin/cos by turns, each reusing x;
    "reuse": a2 = a1 tanh(a1), each intermediate read twice (inlined: 2**n copies of x)."""
    defs, prev = [], "x"
    for i in range(1, n + 1):
        name = "out" if i == n else f"a{i}"
        if mixed == "reuse":
            body = f"{prev}[n] * tanh({prev}[n])"
        elif not mixed:
            body = f"tanh({prev}[n])"
        elif FUNCTIONS[i % 3] == "exp":
            body = f"exp({prev}[n]) + x[n]"
        else:
            body = f"{FUNCTIONS[i % 3]}({prev}[n]) * x[n]"
        defs.append(f"{name}[n] = {body}")
        prev = name
    return Op(name=f"chain{n}", inputs=["x[N]"], definitions=defs)


def _dag_size(e: sp.Basic) -> int:
    seen: set[sp.Basic] = set()
    todo = [e]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(node.args)
    return len(seen)


def _tree_size(e: sp.Basic) -> int:
    return 1 + sum(_tree_size(a) for a in e.args)


def _work(n: int, mixed: bool | str) -> tuple[int, int, int]:
    """(distinct sub-expressions the simplifier visited, DAG size of the derived dx, largest
    canonical body as a tree: what SymPy's own traversals walk)."""
    d = derive(parse(_chain(n, mixed)))
    bodies = [_tree_size(body) for _, body in d.collapser.canon.bodies.values()]
    return len(d.collapser.simplifier._memo), _dag_size(d.final["x"]), max(bodies, default=1)


def _at_most_quadratic(sizes: dict[int, int]) -> None:
    # doubling n may multiply a quadratic measure by 4; 2**n would multiply it by 2**n
    for n in sorted(sizes)[1:]:
        assert sizes[n] <= 4.5 * sizes[n // 2], sizes


def test_tanh_chain_work_grows_at_most_quadratically() -> None:
    work = {n: _work(n, mixed=False) for n in (4, 8, 16)}
    for measure in range(3):
        _at_most_quadratic({n: w[measure] for n, w in work.items()})


def test_mixed_chain_reusing_x_work_grows_at_most_quadratically() -> None:
    work = {n: _work(n, mixed=True) for n in (3, 6, 12)}
    for measure in range(3):
        _at_most_quadratic({n: w[measure] for n, w in work.items()})


def test_chain_reusing_each_intermediate_work_grows_at_most_quadratically() -> None:
    work = {n: _work(n, mixed="reuse") for n in (4, 8, 16)}
    for measure in range(3):
        _at_most_quadratic({n: w[measure] for n, w in work.items()})


def _mlp(layers: int) -> Op:
    """A tanh MLP written as one op: h1 = tanh(x W1), h2 = tanh(h1 W2), ...; each adjoint a
    nest of contractions one sum deeper per layer."""
    defs = ["h1[n, j] = tanh(Sum(x[n, c] * W1[c, j], c))"]
    for i in range(2, layers + 1):
        a, b = ("j", "k") if i % 2 == 0 else ("k", "j")
        defs.append(f"h{i}[n, {b}] = tanh(Sum(h{i - 1}[n, {a}] * W{i}[{a}, {b}], {a}))")
    weights = ["W1[C, H]"] + [f"W{i}[H, H]" for i in range(2, layers + 1)]
    return Op(name=f"mlp{layers}", inputs=["x[N, C]", *weights], definitions=defs)


def test_mlp_work_grows_at_most_quadratically_in_its_layers() -> None:
    # a product multiplied out (_cheapest) expanded every sum body below it too, and the walk
    # simplified each as new: 400, 2656 sub-expressions at 3 and 6 layers (2**n); now 302, 740
    work = {}
    for layers in (3, 6):
        d = derive(parse(_mlp(layers)))
        work[layers] = len(d.collapser.simplifier._memo)
    _at_most_quadratic(work)


def test_long_tanh_chain_stays_a_product_of_saved_tensors() -> None:
    # dx = grad_out * prod_k (1 - a_k**2): n factors, each read from a saved output
    d = derive(parse(_chain(12, mixed=False)))
    dx = d.final["x"]
    factors = sorted(str(f) for f in sp.Mul.make_args(dx))
    expected = [f"1 - a{i}[n]**2" for i in range(1, 12)] + ["1 - out[n]**2", "grad_out[n]"]
    assert factors == sorted(expected)
    assert set(d.saved) == {f"a{i}" for i in range(1, 12)} | {"out"}


def test_expanded_terms_counts_without_expanding() -> None:
    a, b, c, d = sp.symbols("a b c d")
    assert expanded_terms((a + b) * (c + d)) == len(sp.expand_mul((a + b) * (c + d)).args) == 4
    assert expanded_terms(a * (b + c * (a + d))) == 3
    chain = sp.Mul(*[1 - sp.Symbol(f"t{k}") ** 2 for k in range(10)])  # 2**10 terms
    assert expanded_terms(chain) == EXPAND_TERMS + 1  # capped: never counted further


def test_cost_equals_sympy_count_ops() -> None:
    x, y = sp.symbols("x y", real=True)
    k = sp.Symbol("k", integer=True)
    N = sp.Symbol("N", integer=True)
    v = sp.IndexedBase("v", shape=(N,))
    exprs = [
        x - y,
        -x - y,
        -x + y,
        x / y,
        -2 * x / (3 * y),
        sp.exp(-x) * y,
        (x + 1) ** -1,
        sp.exp(x) ** 2 - sp.sqrt(y),
        sp.tanh(x) * (1 - sp.tanh(x) ** 2) / (N - 1),
        sp.Sum(v[k] * x, (k, 0, N - 1)) / N - x,
        sp.Max(x, y) * sp.KroneckerDelta(k, N),
        sp.Rational(-1, 3),
        sp.S.One,
    ]
    for e in exprs:
        sums = sum(1 for s in sp.preorder_traversal(e) if isinstance(s, sp.Sum))
        assert cost(e) == 10 * sums + int(sp.count_ops(e)), e


def test_freshen_bound_renames_every_bound_index_once() -> None:
    k, j, n = sp.symbols("k j n", integer=True)
    N = sp.Symbol("N", integer=True)
    v = sp.IndexedBase("v")
    e = sp.Sum(v[k, n] * sp.Sum(v[j, k], (j, 0, N - 1)), (k, 0, N - 1))
    i0, i1 = sp.symbols("_i0 _i1", integer=True)  # outermost first, from one counter
    expected = sp.Sum(v[i0, n] * sp.Sum(v[i1, i0], (i1, 0, N - 1)), (i0, 0, N - 1))
    assert freshen_bound(e, Fresh()) == expected
    assert freshen_bound(v[n] * 2, Fresh()) == v[n] * 2  # nothing bound: unchanged


def test_substitute_is_xreplace() -> None:
    x, y, z = sp.symbols("x y z")
    shared = sp.tanh(x + y)
    e = shared * sp.exp(shared) + sp.sin(shared) * z
    rule = {x: z, z: x}  # simultaneous, as xreplace
    assert substitute(e, rule) == e.xreplace(rule)


def test_show_reads_the_derivation_the_module_came_from(monkeypatch) -> None:
    e = emit(_chain(3, mixed=False), "out")  # what generate and show both start from
    d = e.derivation

    def derive_again(*_):
        raise AssertionError("explain derived the op again")

    monkeypatch.setattr("derive.symbolic.derivation.derive", derive_again)
    monkeypatch.setattr("derive.emit.generate.derive", derive_again)
    assert explain_module.explain(e).final == d.final  # read, not re-derived
    stepwise = derive(parse(dataclasses.replace(_chain(3, mixed=False), stepwise=True)))
    assert d.steps == stepwise.final  # recorded forms equal a separate stepwise derivation


def _softmaxes(n: int) -> Op:
    """n masked softmaxes in a chain, each over log1p(softplus(..)) of the one before and
    written in one line, e / Sum(e), shifted by its maximum (fuzz 7200256 has two)."""
    defs, prev = [], "x"
    for i in range(1, n + 1):
        body = f"where(w <= g, log1p(softplus({prev}[g, w])), -inf)"
        name = "out" if i == n else f"p{i}"
        defs += [
            f"m{i}[g] = Max({body}, w)",
            f"e{i}[g, w] = exp({body} - m{i}[g])",
            f"{name}[g, w] = e{i}[g, w] / Sum(e{i}[g, u], u)",
        ]
        prev = name
    return Op(name=f"softmaxes{n}", inputs=["x[T, T]"], definitions=defs)


def test_a_chain_of_softmaxes_reads_each_by_name() -> None:
    # inlined, each softmax's instances in the backward name its sum's index otherwise than
    # its definition (u): they were not folded, so the backward recomputed every softmax of
    # the chain inside the next (fuzz 7200256: 1,051 operations, minutes to derive)
    sizes = {}
    for n in (1, 2, 3):
        d = derive(parse(_softmaxes(n)))
        dx = d.final["x"]
        reads = {i.base.label.name for i in dx.atoms(sp.Indexed)}
        assert {f"p{i}" for i in range(1, n)} | {"out"} <= reads, (n, reads)
        sizes[n] = _dag_size(dx)
    _at_most_quadratic({1: sizes[1], 2: sizes[2]})
    assert sizes[3] <= 2 * sizes[2], sizes
