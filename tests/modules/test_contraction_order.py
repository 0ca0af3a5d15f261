"""Three tensors under one sum whose cheaper order only the sizes decide: the module compares
the orders' multiply counts at the call (``derive.ir.nodes.Cheaper``). A draw of ``derive
check`` takes one order; here each op runs at sizes that take each, against autograd
through a plain torch.einsum of the definition, forward and every gradient."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.modules.emitted import imported

CASES = Path(__file__).resolve().parents[1] / "cases"
DT = torch.float64

# (case, einsum, shapes at sizes that take one order, at sizes that take the other)
ORDERS = [
    (
        "linear_attention_inline.py",
        "bte,bse,bsd->btd",
        [(2, 2, 8), (2, 2, 8), (2, 2, 8)],  # T = S = 2, E = D = 8: (q k) v
        [(2, 9, 2), (2, 9, 2), (2, 9, 3)],  # T = S = 9, E = 2, D = 3: q (k v)
    ),
    (
        "low_rank_chain.py",
        "nk,kr,rm->nm",
        [(9, 3), (3, 2), (2, 4)],  # N = 9, K = 3, R = 2, M = 4: (x U) V
        [(2, 7), (7, 5), (5, 6)],  # N = 2, K = 7, R = 5, M = 6: x (U V)
    ),
]


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize(("case", "spec", "first", "second"), ORDERS)
def test_each_order_matches_autograd(case, spec, first, second, which, tmp_path: Path) -> None:
    module, _ = imported(CASES / case, tmp_path)
    gen = torch.Generator().manual_seed(11 + which)
    args = [torch.randn(s, generator=gen, dtype=DT) for s in (first, second)[which]]
    leaves = [a.clone().requires_grad_() for a in args]
    want = torch.einsum(spec, *leaves)
    grad_out = torch.randn(want.shape, generator=gen, dtype=DT)
    want_grads = torch.autograd.grad(want, leaves, grad_out)
    out, saved = module.forward(*args)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-13)
    for got, expected in zip(module.backward(grad_out, saved), want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)


def test_the_orders_are_chosen_at_the_call(tmp_path: Path) -> None:
    """Both orders are in the module, the cheaper picked by the sizes: the two size sets
    above take the two branches of the forward's comparison."""
    module, _ = imported(CASES / "linear_attention_inline.py", tmp_path)
    source = Path(module.__file__).read_text()
    assert "if D * S * T + E * S * T <= D * E * S + D * E * T" in source
    for shapes, cheap in ((ORDERS[0][2], True), (ORDERS[0][3], False)):
        (_, t, e), (_, s, _), (_, _, d) = shapes
        assert (d * s * t + e * s * t <= d * e * s + d * e * t) is cheap
