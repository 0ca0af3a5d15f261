"""bench/hvp.py: every HVP it times equals torch.func's on the torch-ops model (float64)."""

from __future__ import annotations

import pytest
import torch

from bench.hvp import TOL, Size, check, forward_over_reverse, loss_torch, variants

# torch.func's jvp registers its decompositions with torch.jit.script on first use
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)
TINY = Size("tiny", block=2, emb=3, hidden=5, vocab=6, batch=7)


def test_every_hvp_agrees_with_torch_func_on_torch_ops():
    found = check(variants(["T", "G", "GR", "TR", "J"]), TINY, "cpu")
    assert {"T", "G", "GR", "TR"} <= set(found)  # J too where JAX is installed
    assert all(d <= TOL for d in found.values()), found


def test_the_check_sees_a_biased_variance():
    # negative control: the same model with batchnorm's 1/N variance is a different Hessian
    def biased(params, X, Y):
        C, W1, b1, bngain, bnbias, W2, b2 = params
        hprebn = C[X].reshape(X.shape[0], -1) @ W1 + b1
        hpreact = (
            bngain * (hprebn - hprebn.mean(0)) * torch.rsqrt(hprebn.var(0, correction=0) + 1e-5)
        )
        return torch.nn.functional.cross_entropy(torch.tanh(hpreact + bnbias) @ W2 + b2, Y)

    found = check(
        {"T": forward_over_reverse(loss_torch), "B": forward_over_reverse(biased)}, TINY, "cpu"
    )
    assert found["B"] > 1e-4, found
