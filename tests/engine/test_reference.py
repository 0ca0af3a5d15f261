"""The reference interpreter (derive/verify/reference.py) against hand-written torch, float64.

The fuzzer trusts this interpreter to judge generated modules, so it is itself checked here on
the catalogue ops (forward values of every definition and autograd gradients) and on each
construct and function it knows.
"""

from __future__ import annotations

import importlib

import pytest
import sympy as sp
import torch
import torch.nn.functional as F

from derive.language import Definition, Op, parse
from derive.verify.reference import InterpretError, autograd_reference, evaluate
from tests.modules.test_exercise import _params, _seed_forward

F64 = torch.float64
TOL = 1e-12


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _catalogue(name: str):
    return parse(importlib.import_module(f"ops.{name}").OP)


def _grads(fn, inputs: dict, grad_out: torch.Tensor) -> dict:
    """Hand-written torch forward, differentiated by autograd: the gradient of each float input."""
    leaves = {k: v.clone().requires_grad_(v.is_floating_point()) for k, v in inputs.items()}
    out = fn(**leaves)
    wanted = [k for k, v in leaves.items() if v.requires_grad]
    grads = torch.autograd.grad(out, [leaves[k] for k in wanted], grad_out)
    return dict(zip(wanted, grads))


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape, (a.shape, b.shape)
    assert torch.allclose(a, b, rtol=TOL, atol=TOL), float((a - b).abs().max())


def _agree(graph, fn, inputs: dict, out_shape: tuple) -> None:
    values = evaluate(graph, inputs)
    _close(values[graph.output], fn(**inputs))
    grad_out = torch.randn(out_shape, generator=_gen(9), dtype=F64)
    mine = autograd_reference(graph, inputs, grad_out)
    want = _grads(fn, inputs, grad_out)
    assert sorted(mine) == sorted(want)
    for k in want:
        _close(mine[k], want[k])


def test_linear() -> None:
    g = _gen()
    x, W, b = (torch.randn(s, generator=g, dtype=F64) for s in [(5, 3), (3, 4), (4,)])
    _agree(_catalogue("linear"), lambda x, W, b: x @ W + b, dict(x=x, W=W, b=b), (5, 4))


@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 1, 3)])
def test_tanh_any_batch_shape(shape) -> None:
    x = torch.randn(shape, generator=_gen(1), dtype=F64) * 2
    _agree(_catalogue("tanh"), lambda x: torch.tanh(x), dict(x=x), shape)


def test_embedding_repeated_indices() -> None:
    g = _gen(2)
    idx = torch.tensor([[0, 2, 2], [1, 0, 2]])
    C = torch.randn(4, 3, generator=g, dtype=F64)
    _agree(_catalogue("embedding"), lambda idx, C: C[idx], dict(idx=idx, C=C), (2, 3, 3))


def _batchnorm(x, gain, bias, eps=1e-5):
    mean = x.mean(0, keepdim=True)
    var = x.var(0, keepdim=True, unbiased=True)
    return gain * (x - mean) / torch.sqrt(var + eps) + bias


def test_batchnorm_with_param() -> None:
    g = _gen(3)
    x = torch.randn(6, 4, generator=g, dtype=F64) * 3 + 1
    gain, bias = (torch.randn(4, generator=g, dtype=F64) * 0.1 + 1 for _ in range(2))
    _agree(_catalogue("batchnorm"), _batchnorm, dict(x=x, gain=gain, bias=bias), (6, 4))


def test_cross_entropy_scalar_output() -> None:
    g = _gen(4)
    logits = torch.randn(7, 5, generator=g, dtype=F64) * 3
    targets = torch.randint(0, 5, (7,), generator=g)
    graph = _catalogue("cross_entropy")
    _agree(
        graph,
        lambda logits, targets: F.cross_entropy(logits, targets),
        dict(logits=logits, targets=targets),
        (),
    )
    values = evaluate(graph, dict(logits=logits, targets=targets))
    _close(values["logit_maxes"], logits.amax(1))
    _close(values["probs"], torch.softmax(logits, 1))


def test_exercise_every_intermediate_and_gradient() -> None:
    X, Y, params = _params(5, 6, vocab=7, n_embd=3, hidden=5)
    graph = _catalogue("exercise")
    values = evaluate(graph, dict(X=X, Y=Y, **params))
    loss, inter = _seed_forward(X, Y, **params)
    _close(values["loss"], loss)
    for name, t in inter.items():
        _close(values[name], t)
    mine = autograd_reference(graph, dict(X=X, Y=Y, **params), torch.tensor(1.0, dtype=F64))
    want = _grads(lambda **p: _seed_forward(X, Y, **p)[0], params, torch.tensor(1.0, dtype=F64))
    for k in want:
        _close(mine[k], want[k])


# --- each construct and function, on a graph whose body is swapped for the expression ------------


def _graph_with(body, inputs=("x[N, M]", "y[N, M]"), lhs="out[n, m]"):
    """Parse a placeholder op, then replace its one definition's body by a SymPy expression."""
    graph = parse(Op(name="probe", inputs=list(inputs), definitions=[f"{lhs} = x[n, m]"]))
    n, m = sp.symbols("n m", integer=True)
    x, y = graph.base("x"), graph.base("y")
    d = graph.steps[0]
    graph.steps[0] = Definition(d.name, d.indices, body(x[n, m], y[n, m]), f"{lhs} = <probe>")
    return graph


UNARY_CASES = [
    ("exp", sp.exp, torch.exp, False),
    ("log", sp.log, torch.log, True),
    ("tanh", sp.tanh, torch.tanh, False),
    ("sin", sp.sin, torch.sin, False),
    ("cos", sp.cos, torch.cos, False),
    ("sinh", sp.sinh, torch.sinh, False),
    ("cosh", sp.cosh, torch.cosh, False),
    ("Abs", sp.Abs, torch.abs, False),
    ("sign", sp.sign, torch.sign, False),
    ("sqrt", sp.sqrt, torch.sqrt, True),
    ("erf", sp.erf, torch.special.erf, False),
    ("sigmoid", sp.Function("sigmoid"), torch.sigmoid, False),
    ("softplus", sp.Function("softplus"), F.softplus, False),
    ("relu", sp.Function("relu"), torch.relu, False),
    ("log1p", sp.Function("log1p"), torch.log1p, True),
    ("expm1", sp.Function("expm1"), torch.expm1, False),
    ("cube", lambda a: a**3, lambda t: t * t * t, False),
    ("rsqrt", lambda a: a ** sp.Rational(-1, 2), torch.rsqrt, True),
    ("pi_e", lambda a: sp.pi * a + sp.E, lambda t: math_pi * t + math_e, False),
    (
        "of_const",
        lambda a: sp.Function("sigmoid")(sp.pi) * a,
        lambda t: t / (1 + math_e**-math_pi),
        False,
    ),
]
math_pi, math_e = float(sp.pi), float(sp.E)


@pytest.mark.parametrize(
    "name, sym, torch_fn, positive", UNARY_CASES, ids=[c[0] for c in UNARY_CASES]
)
def test_unary_function(name, sym, torch_fn, positive) -> None:
    g = _gen(6)
    x = torch.randn(3, 4, generator=g, dtype=F64)
    x = x.abs() + 0.1 if positive else x
    graph = _graph_with(lambda a, b: sym(a))
    inputs = dict(x=x, y=torch.zeros_like(x))
    _agree(graph, lambda x, y: torch_fn(x) + 0 * y, inputs, (3, 4))


@pytest.mark.parametrize("sym, torch_fn", [(sp.Max, torch.maximum), (sp.Min, torch.minimum)])
def test_elementwise_max_min(sym, torch_fn) -> None:
    g = _gen(7)
    x, y = (torch.randn(3, 4, generator=g, dtype=F64) for _ in range(2))
    _agree(
        _graph_with(lambda a, b: sym(a, 2 * b)),
        lambda x, y: torch_fn(x, 2 * y),
        dict(x=x, y=y),
        (3, 4),
    )


def test_relu_gradient_is_zero_at_zero() -> None:
    graph = _graph_with(lambda a, b: sp.Function("relu")(a))
    x = torch.tensor([[-1.0, 0.0, 2.0]], dtype=F64)
    grads = autograd_reference(graph, dict(x=x, y=x), torch.ones(1, 3, dtype=F64))
    assert grads["x"].tolist() == [[0.0, 0.0, 1.0]]


def test_transposed_contraction_and_broadcast() -> None:
    # issue 9's first case, and a product with an index the body does not depend on
    op = Op(
        name="probe",
        inputs=["x[N, I]", "z[N, J]", "b[J]"],
        definitions=["out[i, j] = Sum(x[n, i] * z[n, j], n)", "s[j, i] = out[i, j] + b[j]"],
    )
    g = _gen(8)
    x, z, b = (torch.randn(s, generator=g, dtype=F64) for s in [(5, 3), (5, 3), (3,)])
    _agree(parse(op), lambda x, z, b: (x.T @ z).T + b[:, None], dict(x=x, z=z, b=b), (3, 3))


def test_nested_reductions_and_division_by_a_reduction() -> None:
    op = Op(
        name="probe",
        inputs=["x[N, M]", "w[M]"],
        definitions=[
            "c[n] = Sum(w[m], m) + Max(Sum(x[n, k] * w[k], k) * x[n, m], m)",
            "out = Sum(c[n] / Sum(exp(x[q, m]), q, m), n)",
        ],
    )
    g = _gen(10)
    x, w = torch.randn(4, 3, generator=g, dtype=F64), torch.randn(3, generator=g, dtype=F64)

    def ref(x, w):
        c = w.sum() + ((x @ w)[:, None] * x).amax(1)
        return (c / x.exp().sum()).sum()

    _agree(parse(op), ref, dict(x=x, w=w), ())


def test_sum_over_an_index_the_body_does_not_use() -> None:
    k = sp.Symbol("k", integer=True)
    graph = _graph_with(lambda a, b: sp.Sum(a * b, (k, 0, 2)))
    g = _gen(13)
    x, y = (torch.randn(2, 3, generator=g, dtype=F64) for _ in range(2))
    _agree(graph, lambda x, y: 3 * x * y, dict(x=x, y=y), (2, 3))


def test_pick_on_an_intermediate_and_a_gather() -> None:
    op = Op(
        name="probe",
        inputs=["z[N, C]", "t[N]: int64", "E[V, D]", "X[N, T]: int64"],
        definitions=[
            "q[n, c] = exp(z[n, c])",
            "p[n] = q[n, t[n]]",
            "emb[n, k, d] = E[X[n, k], d] * p[n]",
            "out[d, k] = Sum(emb[n, k, d], n)",
        ],
    )
    g = _gen(11)
    z, E = torch.randn(4, 3, generator=g, dtype=F64), torch.randn(5, 2, generator=g, dtype=F64)
    t, X = torch.randint(0, 3, (4,), generator=g), torch.randint(0, 5, (4, 3), generator=g)

    def ref(z, t, E, X):
        p = z.exp()[torch.arange(4), t]
        return (E[X] * p[:, None, None]).sum(0).T

    _agree(parse(op), ref, dict(z=z, t=t, E=E, X=X), (2, 3))


def test_kronecker_delta_with_a_data_index() -> None:
    # not in the op language, but in derived adjoints: the interpreter can evaluate those too
    op = Op(name="probe", inputs=["x[N, C]", "t[N]: int64"], definitions=["out[n, c] = x[n, c]"])
    graph = parse(op)
    n, c = sp.symbols("n c", integer=True)
    d = graph.steps[0]
    body = graph.base("x")[n, c] * sp.KroneckerDelta(c, graph.base("t")[n])
    graph.steps[0] = Definition(d.name, d.indices, body, "out[n, c] = <probe>")
    g = _gen(14)
    x, t = torch.randn(4, 3, generator=g, dtype=F64), torch.randint(0, 3, (4,), generator=g)
    _agree(graph, lambda x, t: x * F.one_hot(t, 3).to(F64), dict(x=x, t=t), (4, 3))


def test_unknown_node_is_a_clear_error() -> None:
    graph = _graph_with(lambda a, b: sp.floor(a))
    with pytest.raises(InterpretError, match=r"op 'probe', definition .*floor"):
        evaluate(graph, dict(x=torch.ones(2, 2, dtype=F64), y=torch.ones(2, 2, dtype=F64)))


def test_view_and_batched_definition() -> None:
    op = Op(
        name="probe",
        inputs=["X[N, T]: int64", "C[V, E]", "W[T*E, H]"],
        definitions=["emb[n, t, e] = C[X[n, t], e]", "cat = view(emb, N, T*E)",
                     "out[n, h] = Sum(cat[n, k] * W[k, h], k)"],
        stepwise=True,
    )  # fmt: skip
    g = _gen(12)
    X = torch.randint(0, 4, (3, 2), generator=g)
    C, W = torch.randn(4, 2, generator=g, dtype=F64), torch.randn(4, 5, generator=g, dtype=F64)
    _agree(parse(op), lambda X, C, W: C[X].reshape(3, 4) @ W, dict(X=X, C=C, W=W), (3, 5))


def test_a_condition_on_a_function_of_indices_is_a_value_not_a_subscript() -> None:
    """``sign(0.25*(j - i)) < 0`` is integer-valued but no subscript: it was refused as one
    (fuzz --windows 10496, a case skipped, never judged); here, ``j < i`` by hand."""
    op = Op(
        name="signs",
        inputs=["x[N, N]"],
        definitions=["out[i, j] = where(sign(0.25*(j - i)) < 0, x[i, j] * 2, x[i, j])"],
    )
    x = torch.randn(5, 5, generator=_gen(), dtype=F64)
    below = torch.arange(5)[None, :] < torch.arange(5)[:, None]
    _agree(parse(op), lambda x: torch.where(below, x * 2, x), {"x": x}, (5, 5))
