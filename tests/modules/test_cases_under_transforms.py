"""Every case of tests/cases under torch.func's batched transforms, held to the definitions.

The catalogue's ops have their own such tests (test_torch_func.py); the cases are the forms
users write that the catalogue does not: int inputs read through guards, Max then a
nonlinearity, scans, windows. Each is held to the text oracle (:mod:`derive.verify.oracle`),
never to the module itself: a batch of Hessian-vector products, ``vmap`` over the vjp of
``grad``, the rows of a Hessian as ``jacrev(jacrev(f))`` and ``hessian`` build them, the
double backward batched (a maxout squared refused it: its scatter buffer was made like the
unbatched 1 that grad_out is there).
"""

from __future__ import annotations

import glob

import pytest
import torch

from derive.language import parse
from derive.verify.check import defined_inputs
from tests.modules.emitted import as_functions, imported

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
