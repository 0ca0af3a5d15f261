"""Only the gradients asked for (derive/ir/needs.py): a backward with several inputs takes
``needs``, one flag per input as autograd's ``ctx.needs_input_grad``, and skips the work of
the others; autograd through ``Function.apply`` passes its own flags, first and second order.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from bench.aten_calls import Counting
from generated import layernorm, linear
from tests.op_table import OPS

WITH_NEEDS = [s for s in OPS if "needs" in inspect.signature(s.module.backward).parameters]


def test_every_op_with_several_float_inputs_takes_needs():
    names = {s.name for s in WITH_NEEDS}
    assert {"linear", "layernorm", "batchnorm", "causal_self_attention", "conv2d"} <= names


@pytest.mark.parametrize("spec", WITH_NEEDS, ids=lambda s: s.name)
def test_each_gradient_alone_equals_all_of_them(spec):
    inputs, params = spec.draw(3)
    out, saved = spec.module.forward(*inputs, **params)
    grad_out = torch.randn_like(out)
    every = spec.module.backward(grad_out, saved)
    n = len(every)
    for k in range(n):
        only = spec.module.backward(grad_out, saved, tuple(j == k for j in range(n)))
        for j, (got, want) in enumerate(zip(only, every, strict=True)):
            if j == k and want is not None:
                torch.testing.assert_close(got, want, rtol=0, atol=0)
            else:
                assert got is None, f"{spec.name}: gradient {j} computed though not asked for"


def test_autograd_skips_a_data_inputs_gradient():
    """linear on a batch of data: dx (a GEMM) is not computed, as torch's linear skips it."""
    x = torch.randn(8, 5, dtype=torch.float64)
    W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out = linear.Function.apply(x, W, b)
    with Counting() as mode:
        dW, db = torch.autograd.grad(out.square().sum(), (W, b))
    assert mode.calls["mm"] == 1  # dW alone (with x requiring grad: 2)
    torch.testing.assert_close(dW, x.T @ (2 * (x @ W + b)))
    torch.testing.assert_close(db, (2 * (x @ W + b)).sum(0))


def test_a_gradient_penalty_through_params_that_need_none():
    """The penalty's double backward in x alone, the affine parameters frozen: equal to
    F.layer_norm's through autograd."""
    x = torch.randn(6, 7, dtype=torch.float64, requires_grad=True)
    gain, bias = torch.randn(7, dtype=torch.float64), torch.randn(7, dtype=torch.float64)

    def penalty(f):
        (gx,) = torch.autograd.grad(f(x).pow(3).sum(), x, create_graph=True)
        return torch.autograd.grad(gx.pow(2).sum(), x)[0]

    mine = penalty(lambda x: layernorm.Function.apply(x, gain, bias))
    want = penalty(lambda x: torch.nn.functional.layer_norm(x, (7,), gain, bias))
    torch.testing.assert_close(mine, want, rtol=1e-10, atol=1e-10)


def test_a_plain_backward_runs_without_a_node_of_its_own():
    """Nothing differentiates a backward without create_graph: no _Backward node is built
    (its overhead per op); under create_graph or forward mode's dual numbers it is."""
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    seen = []
    real = linear._Backward.apply
    linear._Backward.apply = lambda *a: seen.append(1) or real(*a)
    try:
        torch.autograd.grad(linear.Function.apply(x, W, b).pow(3).sum(), (x, W, b))
        assert not seen
        torch.autograd.grad(linear.Function.apply(x, W, b).pow(3).sum(), (x, W), create_graph=True)
        assert seen
    finally:
        linear._Backward.apply = real


def test_forward_mode_over_a_plain_backward_is_the_derived_one():
    """The gradient's tangent under forward mode (no create_graph) equals torch's: the
    backward's lines run as they are would read layernorm's saved xhat and rstd as constants."""
    import torch.autograd.forward_ad as fwAD

    x, t = torch.randn(4, 5, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
    gain = torch.randn(5, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(5, dtype=torch.float64)

    def tangent_of_dgain(f):
        with fwAD.dual_level():
            (dgain,) = torch.autograd.grad(f(fwAD.make_dual(x, t)).pow(3).sum(), gain)
            return fwAD.unpack_dual(dgain).tangent

    mine = tangent_of_dgain(lambda x: layernorm.Function.apply(x, gain, bias))
    want = tangent_of_dgain(lambda x: torch.nn.functional.layer_norm(x, (5,), gain, bias))
    torch.testing.assert_close(mine, want, rtol=1e-10, atol=1e-10)


def test_torch_func_asks_only_for_the_arguments_it_differentiates():
    """Per-sample gradients of W (vmap of grad, x data): the backward is asked for W's alone,
    and the gradients are torch's."""
    x = torch.randn(6, 5, dtype=torch.float64)
    W = torch.randn(5, 3, dtype=torch.float64)
    b = torch.randn(3, dtype=torch.float64)
    asked = []
    real = linear.backward

    def spy(grad_out, saved, needs=(True, True, True)):
        asked.append(tuple(needs))
        return real(grad_out, saved, needs)

    def per_sample(f):
        loss = lambda xi, W: f(xi[None], W, b).tanh().sum()  # noqa: E731
        return torch.func.vmap(torch.func.grad(loss, argnums=1), in_dims=(0, None))(x, W)

    linear.backward = spy
    try:
        mine = per_sample(linear.Function.apply)
    finally:
        linear.backward = real
    assert asked and all(n == (False, True, False) for n in asked)
    torch.testing.assert_close(mine, per_sample(lambda x, W, b: x @ W + b), rtol=1e-12, atol=1e-12)


WITH_PRESENT = [
    s
    for s in OPS
    if hasattr(s.module, "_double_backward")
    and "present" in inspect.signature(s.module._double_backward).parameters
]


@pytest.mark.parametrize("spec", WITH_PRESENT, ids=lambda s: s.name)
def test_a_missing_cotangent_is_never_read(spec):
    """The double backward reads a cotangent autograd gave as None (a penalty on one
    gradient) only under its ``present`` flag (derive/ir/given.py): run with each missing
    cotangent as a tensor without data (device meta: its shape may be read, any kernel with a
    CPU tensor raises), every gradient is the one computed with it as zeros. Before, the
    parts of a term only it reaches were computed and thrown away (linear's penalty on x: a
    GEMM on zeros)."""
    inputs, params = spec.draw(4)
    floats = [t for t in inputs if t.is_floating_point()]
    out, _ = spec.module.forward(*inputs, **params)
    grad_y = torch.randn_like(out)
    for k in range(len(floats)):
        cotangents = [
            torch.randn_like(t) if j == k else torch.zeros_like(t) for j, t in enumerate(floats)
        ]
        present = tuple(j == k for j in range(len(floats)))
        one, saved = spec.module._double_forward(*inputs, grad_y, *cotangents, **params)
        missing = {id(v) for j, v in enumerate(cotangents) if j != k}
        blind = tuple(s.to("meta") if id(s) in missing else s for s in saved)
        want = spec.module._double_backward(one, saved, present=present)
        got = spec.module._double_backward(one, blind, present=present)
        for g, w in zip(got, want, strict=True):
            assert (g is None) == (w is None)
            if w is not None:
                torch.testing.assert_close(g, w, rtol=0, atol=0)
