"""Only the gradients asked for (derive/ir/needs.py): a backward with several inputs takes
``needs``, one flag per input as autograd's ``ctx.needs_input_grad``, and skips the work of
the others; autograd through ``Function.apply`` passes its own flags, first and second order.
"""

from __future__ import annotations

import inspect
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from generated import layernorm, linear
from tests.op_table import OPS

WITH_NEEDS = [s for s in OPS if "needs" in inspect.signature(s.module.backward).parameters]


class _Calls(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


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
    with _Calls() as mode:
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
