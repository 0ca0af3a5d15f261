"""A tensor that may hold -inf (a masked score, ``v = where(j <= i, x, -inf)``) is no finite
real: exp(v) is 0 there, not positive. SymPy took it as positive, and folded ``sign(exp(v))``
to 1, ``where(exp(v) > 0, a, b)`` to a, and the backward of a guard ``where(e > 0, ..)`` on
``e = exp(v)`` likewise: silently wrong in the forward, the backward or both (fuzz 841046,
``sign(sqrt(exp(v) / 2))``: 0.6 relative off). Each op here against torch by hand (an oracle
that reads neither the definitions nor the engine's parse of them), float64, forward and the
gradient of x, the masked entries included.
"""

from __future__ import annotations

import pytest
import torch

from derive import Op
from derive.emit.generate import module_source
from derive.verify.check import load_module

MASK = ["v[i, j] = where(j <= i, x[i, j], -inf)", "e[i, j] = exp(v[i, j])"]

CASES = {  # the last definition, and the same in torch of x and e = exp(v)
    "sign of exp, inline": (
        "out[i, j] = x[i, j] * sign(exp(v[i, j]))",
        lambda x, e: x * torch.sign(e),
    ),
    "sign of the sqrt of exp (fuzz 841046)": (
        "out[i, j] = x[i, j] - sign(sqrt((1/2) * exp(v[i, j])))",
        lambda x, e: x - torch.sign(torch.sqrt(e / 2)),
    ),
    "sign of a named exp": ("out[i, j] = x[i, j] * sign(e[i, j])", lambda x, e: x * torch.sign(e)),
    "a condition on exp": (
        "out[i, j] = where(exp(v[i, j]) > 0, x[i, j], 2*x[i, j])",
        lambda x, e: torch.where(e > 0, x, 2 * x),
    ),
    "a condition on a named exp": (
        "out[i, j] = where(e[i, j] > 0, x[i, j], 2*x[i, j])",
        lambda x, e: torch.where(e > 0, x, 2 * x),
    ),
    "exp against 0": (
        "out[i, j] = where(exp(v[i, j]) != 0, x[i, j], 2*x[i, j])",
        lambda x, e: torch.where(e != 0, x, 2 * x),
    ),
    "sign of a sigmoid": (
        "out[i, j] = x[i, j] * sign(sigmoid(v[i, j]))",
        lambda x, e: x * torch.sign(e / (1 + e)),
    ),
    "an entropy's guard": (
        "out[i, j] = where(e[i, j] > 0, e[i, j] * log(e[i, j]), 0) + x[i, j]",
        lambda x, e: torch.where(e > 0, e * torch.log(e), 0) + x,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_masked_exp_is_zero_not_positive(name: str, tmp_path) -> None:
    definition, by_hand = CASES[name]
    op = Op(name="masked", inputs=["x[N, N]"], definitions=[*MASK, definition])
    path = tmp_path / "masked.py"
    path.write_text(module_source(op, str(tmp_path)))
    module = load_module(path)
    x = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    mine, theirs = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    v = torch.where(torch.ones(5, 5, dtype=torch.bool).tril(), theirs, float("-inf"))
    out, want = module.Function.apply(mine), by_hand(theirs, torch.exp(v))
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    grad = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    out.backward(grad)
    want.backward(grad)
    torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-12, atol=1e-12)


def test_which_tensors_may_hold_minus_inf() -> None:
    """An infinite branch, what reads it (through a view or a lifted Max too) may hold -inf;
    inputs and what reads none of these are finite reals."""
    from derive.language import parse

    op = Op(
        name="flags",
        inputs=["x[N, N]", "y[N]"],
        definitions=[
            *MASK,
            "w = view(v, N*N)",
            "h[i] = exp(Max(v[i, j], j)) + y[i]",
            "f[i] = y[i] * 2",
            "out[i] = h[i] + f[i] + Sum(e[i, j], j) + Sum(w[k], k)",
        ],
        stepwise=True,
    )
    g = parse(op)
    flags = {name: t.unbounded for name, t in g.tensors.items()}
    assert not flags["x"] and not flags["y"] and not flags["f"]
    assert flags["v"] and flags["e"] and flags["w"] and flags["h"] and flags["out"]
    assert flags["h_max0"]  # the Max lifted out of h into a definition of its own
    assert g.tensors["v"].base.is_real is None and g.tensors["f"].base.is_real
