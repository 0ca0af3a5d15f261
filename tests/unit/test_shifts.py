"""Shifts the output does not see (derive/symbolic/shifts.py): each maximum the proof finds is
checked against the definitions' text. The op is rewritten as text with the maximum shifted by
an input of random values, ``m = m_unshifted + m_shift``, and both are evaluated by the oracle
that reads the strings without the parse (derive/verify/oracle.py): the output must not move.
A proof that misread an op would give its maximum an adjoint of 0 where it has one."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from derive import Op
from derive.emit.generate import load_op
from derive.language import Definition, ReduceMax, parse
from derive.symbolic.derivation import derive
from derive.symbolic.shifts import unseen_shifts
from derive.verify.check import defined_inputs
from derive.verify.oracle import evaluate_text, oracle_output

ROOT = Path(__file__).resolve().parents[2]
WITH_MAX = sorted(
    p for folder in ("ops", "tests/cases") for p in (ROOT / folder).glob("*.py")
    if "Max(" in p.read_text()
)  # fmt: skip


def _maxima(op: Op) -> list[str]:
    g = parse(op)
    return [s.name for s in g.steps if isinstance(s, Definition) and isinstance(s.body, ReduceMax)]


def _shifted(op: Op, m: str, dims: tuple) -> Op:
    """``op`` with ``m`` defined as its maximum plus an input ``m_shift``, as text."""
    at = next(k for k, t in enumerate(op.definitions) if re.match(rf"\s*{m}\s*[\[=]", t))
    text = op.definitions[at]
    lhs = re.match(rf"\s*{m}\s*(\[[^\]]*\])?\s*=", text).group(1) or ""
    renamed = re.sub(rf"^\s*{m}\b", f"{m}_unshifted", text)
    shift = f"{m}{lhs} = {m}_unshifted{lhs} + {m}_shift{lhs}"
    declared = f"{m}_shift[{', '.join(dims)}]" if dims else f"{m}_shift"
    definitions = [*op.definitions[:at], renamed, shift, *op.definitions[at + 1 :]]
    return dataclasses.replace(op, inputs=[*op.inputs, declared], definitions=definitions)


@pytest.mark.parametrize("path", WITH_MAX, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_proven_shift_does_not_move_the_output(path: Path) -> None:
    op = load_op(path)
    g = parse(op)
    unseen = unseen_shifts(g)
    if not unseen:
        pytest.skip("no maximum proven unseen")
    inputs, _ = defined_inputs(g, seed=3)
    named = dict(zip(g.inputs, inputs, strict=True))
    values = evaluate_text(op, named)
    want = oracle_output(op, named)
    gen = torch.Generator().manual_seed(5)
    batched = next((n for n in g.inputs if g.tensors[n].batched), None)
    lead = () if batched is None else named[batched].shape[: 1 - len(g.tensors[batched].dims)]
    for m in sorted(unseen):
        t = g.tensors[m]
        shape = (*lead, *values[m].shape[1:]) if t.batched else values[m].shape
        dims = ("...", *map(str, t.dims[1:])) if t.batched else tuple(map(str, t.dims))
        shifted = _shifted(op, m, dims)
        shift = torch.randn(shape, generator=gen, dtype=torch.float64)
        got = oracle_output(shifted, {**named, f"{m}_shift": shift})
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, equal_nan=True)


def _op(*definitions: str, inputs: tuple = ("x[N, C]",)) -> Op:
    return Op(name="shift_probe", inputs=list(inputs), definitions=list(definitions))


SEEN = {
    "a maximum read as a value": (
        "m[n] = Max(x[n, c], c)",
        "out[n] = m[n] + log(Sum(exp(x[n, c]), c))",
    ),
    "an exp left unnormalised": (
        "m[n] = Max(x[n, c], c)",
        "out[n, c] = exp(x[n, c] - m[n])",
    ),
    "a normaliser with a term beside the sum": (
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "out[n, c] = e[n, c] / (1 + Sum(e[n, c2], c2))",
    ),
    "a normaliser over another axis": (
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "out[n, c] = e[n, c] / Sum(e[n2, c], n2)",
    ),
}


@pytest.mark.parametrize("definitions", SEEN.values(), ids=SEEN.keys())
def test_a_shift_the_output_sees_is_not_unseen(definitions: tuple) -> None:
    # (the parse may add a maximum of its own, a logsumexp's, which is unseen: not m)
    assert "m" not in unseen_shifts(parse(_op(*definitions)))


UNSEEN = {
    "softmax": (
        "m[n] = Max(x[n, c], c)",
        "e[n, c] = exp(x[n, c] - m[n])",
        "out[n, c] = e[n, c] / Sum(e[n, c2], c2)",
    ),
    "logsumexp": ("m[n] = Max(x[n, c], c)", "out[n] = m[n] + log(Sum(exp(x[n, c] - m[n]), c))"),
    "a softmax over a segment, as a graph aggregates it": (
        "mx[v, k] = Max(where(dst[e] == v, s[e, k], -inf), e)",
        "ex[e, k] = exp(s[e, k] - mx[dst[e], k])",
        "den[v, k] = Sum(where(dst[e] == v, ex[e, k], 0), e)",
        "out[v, k] = b[v, k] * Sum(where(dst[e] == v, ex[e, k] / den[v, k] * w[e], 0), e)",
    ),
}


@pytest.mark.parametrize("name", UNSEEN)
def test_a_normalised_shift_is_unseen_and_passes_nothing_back(name: str) -> None:
    op = _op(*UNSEEN[name])
    if "segment" in name:
        inputs = ["s[E, K]", "dst[E]: int64", "w[E]", "b[V, K]"]
        op = dataclasses.replace(op, inputs=inputs, ranges={"v": "V"})
    d = derive(parse(op))
    (m,) = _maxima(op)
    assert set(d.adjoints.unseen) == {m}
    assert not any(t.endswith("argmax") for t in d.saved), d.saved
