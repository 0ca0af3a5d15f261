"""The collapses, checked by SymPy: derived by the rules, equal to the seeds' closed forms."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import sympy as sp

from derive.emit.generate import load_op
from derive.language import parse
from derive.symbolic.derivation import Collapser, derive
from derive.symbolic.reverse import derive_adjoints

OPS = Path(__file__).resolve().parents[2] / "ops"


def _graph(name: str):
    return parse(load_op(OPS / f"{name}.py"))


def _syms(g, *names):
    return [g.tensors[n].base for n in names]


def test_max_subtraction_adjoint_is_exactly_zero() -> None:
    g = _graph("cross_entropy")
    collapser = Collapser(g, derive_adjoints(g))
    assert collapser.raw("logit_maxes") != 0  # the chain rule alone leaves a long expression
    assert collapser.simplified("logit_maxes") == 0


def test_cross_entropy_collapses_to_softmax_minus_onehot() -> None:
    g = _graph("cross_entropy")
    d = derive(g)
    probs, targets = _syms(g, "probs", "targets")
    n, c = d.adjoints.free["logits"]
    N = sp.Symbol("N", integer=True, positive=True)
    grad_out = sp.Symbol("grad_out", real=True)
    expected = grad_out * (probs[n, c] - sp.KroneckerDelta(c, targets[n])) / N
    assert sp.expand(d.final["logits"] - expected) == 0
    assert d.saved == ["targets", "probs"]  # nothing else is kept for the backward


def test_batchnorm_collapses_to_three_term_closed_form() -> None:
    g = _graph("batchnorm")
    d = derive(g)
    gain, bnvar_inv, bnraw = _syms(g, "gain", "bnvar_inv", "bnraw")
    n, m = d.adjoints.free["x"]
    N = sp.Symbol("N", integer=True, positive=True)
    dout = d.adjoints.symbol("out", (n, m)).base
    k = sp.Symbol("k", integer=True)
    s_dout = sp.Sum(dout[k, m], (k, 0, N - 1))
    s_dout_xhat = sp.Sum(dout[k, m] * bnraw[k, m], (k, 0, N - 1))
    closed = (
        gain[m] * bnvar_inv[m] / N
        * (N * dout[n, m] - s_dout - N / (N - 1) * bnraw[n, m] * s_dout_xhat)
    )  # fmt: skip
    got = d.final["x"].replace(lambda e: isinstance(e, sp.Sum), lambda e: _rebind(e, k))
    assert sp.expand(got - closed) == 0
    assert d.saved == ["gain", "bnvar_inv", "bnraw"]


def _rebind(e: sp.Sum, k: sp.Symbol) -> sp.Sum:
    ((var, lo, hi),) = e.limits
    return sp.Sum(e.function.xreplace({var: k}), (k, lo, hi))


def test_tanh_backward_reuses_saved_output() -> None:
    g = _graph("tanh")
    d = derive(g)
    (b,) = d.adjoints.free["x"]
    out = g.tensors["out"].base
    grad_out = sp.IndexedBase("grad_out", shape=g.tensors["out"].dims, real=True)
    assert sp.expand(d.final["x"] - grad_out[b] * (1 - out[b] ** 2)) == 0
    assert d.saved == ["out"]


@pytest.mark.parametrize("sizes", [3, 4])
@pytest.mark.parametrize("name", ["linear", "tanh", "embedding", "batchnorm", "cross_entropy"])
def test_simplified_agrees_with_unsimplified(name: str, sizes: int) -> None:
    """Evaluate raw (chain rule, deltas and all) and simplified adjoints on concrete numbers."""
    from tests.evaluate import agree

    assert agree(_graph(name), sizes=sizes, seed=sizes)


def test_the_interpreter_catches_a_forgotten_bessel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: batchnorm's closed form with N instead of N - 1 is caught."""
    import tests.evaluate as evaluate

    def bessel_forgotten(g):
        d = derive(g)
        n = next(s for s in g.sizes if s.name == "N")
        d.final["x"] = d.final["x"].xreplace({1 / (n - 1): 1 / n})  # the limits keep N - 1
        return d

    monkeypatch.setattr(evaluate, "derive", bessel_forgotten)
    with pytest.raises(AssertionError, match="batchnorm: dx"):
        evaluate.agree(_graph("batchnorm"), sizes=3, seed=0)


def test_log_softmax_backward_reads_exp_of_the_saved_output() -> None:
    # exp(x - max - log S) = exp(x - max) / S: the softmax is exp(out), one saved tensor
    from derive.emit.generate import load_op
    from derive.language import parse
    from derive.symbolic.derivation import derive

    d = derive(parse(load_op(Path(__file__).resolve().parents[2] / "ops" / "log_softmax.py")))
    assert str(d.final["x"]) == (
        "-exp(out[batch, c])*Sum(grad_out[batch, c1], (c1, 0, C - 1)) + grad_out[batch, c]"
    )
    assert d.saved == ["out"]


CASES = OPS.parent / "tests" / "cases"
SHIFTED = {  # softmaxes written the ways people write them: d/dm of each is exactly 0
    "named": [
        "S[b, t] = Sum(e[b, t, u], u)",
        "out[b, t, d] = Sum(e[b, t, u] * v[b, u, d], u) / S[b, t]",
    ],
    "inline": None,  # tests/cases/softmax_weighted_sum.py as it stands: Sum(e v) / Sum(e)
    "temperature": [
        "e[b, t, u] = exp((masked[b, t, u] - m[b, t]) / 2)",
        "p[b, t, u] = e[b, t, u] / Sum(e[b, t, u2], u2)",
        "out[b, t, d] = Sum(p[b, t, u] * v[b, u, d], u)",
    ],
}


@pytest.mark.parametrize("form", SHIFTED)
def test_max_adjoint_of_a_shifted_softmax_is_exactly_zero(form: str) -> None:
    """out = sum_u e v / S with e = exp(s - m): d out / d m = -out + out = 0, once
    sum_u e sum_d g v is read as sum_d g (S out) (the sums interchanged), and sums equal up to
    the names of their bound indices are one sum (S written inline twice, or beside sum_u e)."""
    op = load_op(CASES / "softmax_weighted_sum.py")
    if SHIFTED[form] is not None:
        kept = 2 if SHIFTED[form][0].startswith("e[") else 3  # masked, m (and e)
        op = dataclasses.replace(op, definitions=list(op.definitions[:kept]) + SHIFTED[form])
    g = parse(op)
    collapser = Collapser(g, derive_adjoints(g))
    assert collapser.raw("m") != 0
    assert collapser.simplified("m") == 0
    assert not any(name.endswith("_argmax") for name in derive(g).saved)
