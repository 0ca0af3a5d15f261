"""Every case of tests/cases under torch.func's batched transforms, held to the definitions.

The catalogue's ops have their own such tests (test_torch_func.py); the cases are the forms
users write that the catalogue does not: int inputs read through guards, Max then a
nonlinearity, scans, windows. Two checks per case, each against the text oracle
(:mod:`derive.verify.oracle`) or autograd through the module's own samples:

- a batch of Hessian-vector products, ``vmap`` over the vjp of ``grad``: the rows of a
  Hessian as ``jacrev(jacrev(f))`` and ``hessian`` build them, the double backward batched
  (a maxout squared refused it: its scatter buffer was made like the unbatched 1 that
  grad_out is there);
- ``vmap`` over every input, int ones too, of the output and of a per-sample gradient, each
  sample against the op called on it alone (an index's range check read a batched tensor's
  values, which vmap refuses: 8 cases raised).
"""

from __future__ import annotations

import glob

import pytest
import torch

from derive.language import parse
from derive.verify.check import defined_inputs
from tests.modules.emitted import as_functions, hessian_in, imported

CASES = sorted(glob.glob("tests/cases/*.py"))


def _close(mine, want, tol):
    mine, want = mine.detach(), want.detach()
    assert mine.shape == want.shape
    assert float((mine - want).abs().max()) <= tol * max(1.0, float(want.abs().max()))


def _randn(shape, seed):
    return torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("path", CASES)
def test_batched_hessian_vector_products_equal_the_definitions(path, tmp_path):
    module, op = imported(path, tmp_path)
    inputs, _ = defined_inputs(parse(op), 0)
    mine, text, xs = as_functions(op, module, inputs)
    w = _randn(mine(*xs).shape, 1)
    argnums = tuple(range(len(xs)))
    vs = tuple(_randn((2, *x.shape), 2 + k) for k, x in enumerate(xs))

    def rows(f):
        scalar = lambda *a: (f(*a) * w).sum()  # noqa: E731
        _, vjp = torch.func.vjp(torch.func.grad(scalar, argnums), *xs)
        return torch.func.vmap(vjp)(vs)

    for got, want in zip(rows(mine), rows(text), strict=True):
        _close(got, want, 1e-8)


@pytest.mark.parametrize("path", CASES)
def test_vmap_over_every_input_equals_each_sample(path, tmp_path):
    module, op = imported(path, tmp_path)
    inputs, _ = defined_inputs(parse(op), 0)
    noise = [_randn(t.shape, 5 + k) for k, t in enumerate(inputs)]
    batch = [
        torch.stack([t, t + 0.1 * n if t.is_floating_point() else t])
        for t, n in zip(inputs, noise, strict=True)
    ]
    apply = module.Function.apply
    stacked = torch.func.vmap(apply)(*batch)
    floats = tuple(k for k, t in enumerate(inputs) if t.is_floating_point())
    loss = lambda *a: apply(*a).pow(2).sum()  # noqa: E731
    per_sample = torch.func.vmap(torch.func.grad(loss, floats))(*batch)
    for s in range(2):
        sample = [b[s] for b in batch]
        _close(stacked[s], apply(*sample), 1e-12)
        leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in sample]
        want = torch.autograd.grad(loss(*leaves), [leaves[k] for k in floats])
        for got, ref in zip(per_sample, want, strict=True):
            _close(got[s], ref, 1e-10)


@pytest.mark.parametrize("path", CASES)
def test_a_hessian_in_one_input_of_several_equals_the_definitions(path, tmp_path):
    """``hessian(f, argnums=k)``: the backward node runs with a gradient asked for and one
    not. A stepwise op returned every gradient anyway, and torch's forward mode (the jvp of
    its backward node) failed on the one it had no tangent for: an INTERNAL ASSERT (found
    probing group_norm with its affine parameters)."""
    module, op = imported(path, tmp_path)
    inputs, _ = defined_inputs(parse(op), 0)
    mine, text, xs = as_functions(op, module, inputs)
    if len(xs) < 2:
        pytest.skip("one float input: its Hessian is the one over every input")
    w = _randn(mine(*xs).shape, 1)
    for k in range(len(xs)):
        _close(hessian_in(mine, xs, w, k), hessian_in(text, xs, w, k), 1e-8)
