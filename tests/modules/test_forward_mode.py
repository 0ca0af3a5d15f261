"""Forward mode through generated ops is derived, and equals the definitions' own.

Each module carries ``_jvp``, the tangent map derived by :mod:`derive.symbolic.forward_mode`
(one tangent step per tensor: ``t_u = sum over reads df/dv * t_v``), and ``Function.jvp``
calls it: ``torch.func.jvp``, ``jacfwd``, ``hessian``, forward-over-reverse and
``torch.autograd.forward_ad`` all run it. The reference is torch's own forward mode through
the definitions' text (:mod:`derive.verify.oracle`), so a tangent that agreed only with its own
forward cannot pass.
"""

from __future__ import annotations

import glob
import importlib
import math
import runpy

import pytest
import torch

import derive.emit.tangent as tangent_emit
from derive import Op
from derive.emit.generate import module_program
from derive.errors import CheckFailed, DerivationError
from derive.language import parse
from derive.verify.check import defined_inputs, jvp_report
from derive.verify.oracle import oracle_output, oracle_tangent, tangent
from fuzz.check import load_module
from tests.modules.emitted import imported

CATALOGUE = sorted(glob.glob("ops/*.py"))
CASES = sorted(glob.glob("tests/cases/*.py"))
TOL = 1e-10


def _emitted(op: Op, folder):
    """A fresh derivation (for a test that changes the derivation itself)."""
    return load_module(module_program(op, folder), op.name, folder)


def _close(mine: torch.Tensor, want: torch.Tensor, tol: float = TOL) -> None:
    mine, want = mine.detach(), want.detach()
    assert mine.shape == want.shape
    if want.numel():
        scale = max(1.0, float(want.abs().max()))
        assert float((mine - want).abs().max()) <= tol * scale


def _functions(op: Op, module):
    """The op as a function of its float inputs (ints fixed): generated, and from the text."""
    g = parse(op)
    inputs, _ = defined_inputs(g, 0)
    floats = [k for k, t in enumerate(inputs) if t.is_floating_point()]

    def call(apply):
        def f(*xs):
            args = list(inputs)
            for k, x in zip(floats, xs, strict=True):
                args[k] = x
            return apply(args)

        return f

    mine = call(lambda args: module.Function.apply(*args))
    text = call(lambda args: oracle_output(op, dict(zip(g.inputs, args, strict=True))))
    return mine, text, tuple(inputs[k] for k in floats)


def _randn_like(xs, seed):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(x.shape, dtype=x.dtype, generator=gen) for x in xs)


@pytest.mark.parametrize("path", CATALOGUE)
def test_jvp_jacfwd_and_forward_over_reverse_equal_the_definitions(path):
    op = runpy.run_path(path)["OP"]
    module = importlib.import_module(f"generated.{op.name}")
    assert module._jvp  # derived, not refused
    mine, text, xs = _functions(op, module)
    ts = _randn_like(xs, 1)
    (out, t_out), (want_out, want_t) = (torch.func.jvp(f, xs, ts) for f in (mine, text))
    _close(out, want_out)
    _close(t_out, want_t)
    # jacfwd: one jvp per basis tangent, vmapped (the generated vmap rule runs _jvp batched)
    _close(torch.func.jacfwd(mine)(*xs), torch.func.jacfwd(text)(*xs))
    # forward over reverse: the jvp of the gradient, a Hessian-vector product
    w = torch.randn(want_out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    argnums = tuple(range(len(xs)))

    def hvp(f):
        scalar = lambda *a: (f(*a) * w).sum()  # noqa: E731
        return torch.func.jvp(lambda *a: torch.func.grad(scalar, argnums)(*a), xs, ts)[1]

    for got, want in zip(hvp(mine), hvp(text), strict=True):
        _close(got, want, 1e-8)


@pytest.mark.parametrize("path", CATALOGUE)
def test_dual_numbers_through_the_plain_function(path):
    """``torch.autograd.forward_ad`` outside torch.func: the old-style node's jvp."""
    op = runpy.run_path(path)["OP"]
    module = importlib.import_module(f"generated.{op.name}")
    report = jvp_report(module, parse(op), seed=1)  # raises CheckFailed on a mismatch
    assert report.startswith("  tangent (jvp) vs torch's forward mode")


@pytest.mark.parametrize("path", CASES)
def test_case_tangents_equal_the_definitions(path, tmp_path):
    module, op = imported(path, tmp_path)
    for seed in range(2):
        jvp_report(module, parse(op), seed)


def test_a_wrong_tangent_is_caught(tmp_path):
    """The comparison can fail: the derived tangent scaled by 1.001 is refused."""
    module, op = imported("ops/layernorm.py", tmp_path)
    derived = module._jvp
    module._jvp = lambda *a, **k: 1.001 * derived(*a, **k)
    with pytest.raises(CheckFailed, match="the tangent \\(jvp\\) differs"):
        jvp_report(module, parse(op))


def test_tanh_tangent_reads_the_saved_output(tmp_path):
    """Printing: the derived tangent folds 1 - tanh(x)**2 onto the output, as the backward."""
    module = importlib.import_module("generated.tanh")
    assert "    t_out[batch] = (1 - out[batch]**2)*t_x[batch]\n" in module.__doc__


def test_max_pool_tangent_picks_the_argmax(tmp_path):
    """Max's tangent is its body's at the argmax: a gather, never a sum over ties."""
    module = importlib.import_module("generated.max_pool2d")
    assert "    t_out[n, c, i, j] = t_x[n, c, i*stride + floor(out_argmax[n, c, i, j]/W)," in (
        module.__doc__
    )


def test_softmax_shift_has_no_tangent(tmp_path):
    """softmax's maximum is a shift the output does not see (derive/symbolic/shifts.py): it
    gets no tangent, and the tangents read no argmax."""
    module = importlib.import_module("generated.softmax")
    assert "t_maxes" not in module.__doc__ and "argmax" not in module.__doc__
    assert "    t_counts[batch, c] = counts[batch, c]*t_x[batch, c]\n" in module.__doc__


def test_an_underived_tangent_raises_one_line(tmp_path, monkeypatch):
    def refuse(d):
        raise DerivationError(d.graph.op.name, "no rule for this construct (a test)")

    monkeypatch.setattr(tangent_emit, "tangent_graph", refuse)
    op = runpy.run_path("ops/tanh.py")["OP"]
    module = _emitted(op, tmp_path)
    assert "Tangents (forward mode): not derived (no rule for this construct" in module.__doc__
    assert "not derived" in jvp_report(module, parse(op))
    x = torch.randn(3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="^tanh: forward mode was not derived"):
        torch.func.jvp(module.Function.apply, (x,), (torch.ones_like(x),))


@pytest.mark.parametrize(
    "name, reference",
    [
        ("softmax", lambda x: torch.softmax(x, -1)),
        ("log_softmax", lambda x: torch.log_softmax(x, -1)),
        ("logsumexp", lambda x: torch.logsumexp(x, -1)),
        ("sigmoid", torch.sigmoid),
        ("tanh", torch.tanh),
    ],
)
def test_tangents_are_finite_where_the_forward_is(name, reference):
    """Range: logits of +-1e4, a sigmoid at -800: the tangent is finite and torch's."""
    module = importlib.import_module(f"generated.{name}")
    x = torch.tensor([[-1e4, -800.0, 0.0, 3.0], [1e4, 1e4 - 1.0, -1e4, 800.0]], dtype=torch.float64)
    t = torch.tensor([[1.0, -2.0, 0.5, 1.0], [0.25, 1.0, -1.0, 2.0]], dtype=torch.float64)
    out, t_out = torch.func.jvp(module.Function.apply, (x,), (t,))
    want_out, want_t = torch.func.jvp(reference, (x,), (t,))
    assert torch.isfinite(out).all() and torch.isfinite(t_out).all()
    _close(t_out, want_t)


def test_cross_entropy_tangent_at_extreme_logits():
    from generated import cross_entropy

    logits = torch.tensor([[1e4, -1e4, 0.0], [-800.0, 800.0, 1.0]], dtype=torch.float64)
    targets = torch.tensor([1, 0])
    t = torch.tensor([[1.0, 2.0, -1.0], [0.5, -0.5, 3.0]], dtype=torch.float64)
    mine = tangent(
        cross_entropy.Function.apply, {"logits": logits, "targets": targets}, {"logits": t}
    )
    want = torch.func.jvp(lambda z: torch.nn.functional.cross_entropy(z, targets), (logits,), (t,))[
        1
    ]
    assert math.isfinite(float(mine))
    _close(mine, want)


def test_the_text_oracle_tangent_is_torch_forward_mode():
    """The reference itself: oracle_tangent of tanh is (1 - tanh^2) t, by torch's formulas."""
    op = runpy.run_path("ops/tanh.py")["OP"]
    x = torch.linspace(-2, 2, 5, dtype=torch.float64)
    t = torch.ones_like(x)
    _close(oracle_tangent(op, {"x": x}, {"x": t}), 1 - torch.tanh(x) ** 2)


def test_the_text_oracle_tangent_of_a_selection_is_the_selected_tangent_exactly():
    """maximum/minimum in the text oracle select, so their tangent is the selected input's
    tangent to the last bit. torch's own jvp of ``minimum``, ``other_t + mask * (self_t -
    other_t)``, rounds a selected tangent of 0.2 away against an unselected one of 1e6 (fuzz
    1080291 called the exact generated jvp wrong by 1e-10)."""
    op = Op("sel", ["x[N]", "y[N]"], ["out[n] = minimum(x[n], y[n]) + maximum(x[n], -y[n])"])
    x = torch.tensor([0.5, -2.0, 3.0], dtype=torch.float64)
    y = torch.tensor([4.0, 1.0, -1.0], dtype=torch.float64)
    tx = torch.tensor([0.21982558105162395, -0.3, 0.7], dtype=torch.float64)
    ty = torch.tensor([1e6, -1e6, 3e5], dtype=torch.float64)
    found = oracle_tangent(op, {"x": x, "y": y}, {"x": tx, "y": ty})
    want = torch.where(x <= y, tx, ty) + torch.where(x >= -y, tx, -ty)
    assert torch.equal(found, want)


def test_a_tangent_along_some_inputs_reads_no_partial_of_the_others(tmp_path):
    """torch hands jvp None for an input that carries no tangent (a constant of
    torch.func.jvp or hessian); read as zeros, its partial multiplied them: x sqrt(y)'s
    tangent along x alone was t_x sqrt(y) + 0 * inf = nan at y = 0, and so the Hessian in x
    (found by probing). Its terms are now not read (seeds.gated_tangents)."""
    import torch.autograd.forward_ad as fwad

    op = Op("x_root_y", ["x[N]", "y[N]"], ["out[n] = x[n] * sqrt(y[n])"])
    module = _emitted(op, tmp_path)
    x = torch.tensor([1.0, 2.0, -3.0], dtype=torch.float64)
    y = torch.tensor([0.0, 4.0, 0.25], dtype=torch.float64)
    t = torch.tensor([1.0, -3.0, 0.5], dtype=torch.float64)
    want = oracle_tangent(op, {"x": x, "y": y}, {"x": t})
    assert torch.isfinite(want).all()
    _, got = torch.func.jvp(lambda x: module.Function.apply(x, y), (x,), (t,))
    _close(got, want)
    with fwad.dual_level():
        dual = module.Function.apply(fwad.make_dual(x, t), y)
        _close(fwad.unpack_dual(dual).tangent, want)
    w = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)

    def loss(f):
        return lambda x: (f(x) * x * w).sum()

    hessian = torch.func.hessian(loss(lambda x: module.Function.apply(x, y)))(x)
    _close(hessian, torch.func.hessian(loss(lambda x: x * y.sqrt()))(x))
