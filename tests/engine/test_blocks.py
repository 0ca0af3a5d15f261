"""The block forms ``show`` prints: dx collapsed down to dy where y = F(x) alone.

Each one is checked against autograd through the reference interpreter's own forward from x to
y (``derive.verify.reference``, which shares nothing with the simplifier): for a random dy,
``grad((y * dy).sum(), x)`` must equal the block expression evaluated on the forward's values.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy as sp
import torch

from derive.emit.generate import load_op
from derive.language import parse
from derive.symbolic.collapse import block_output
from derive.symbolic.derivation import Derivation, derive
from derive.verify.binding import bind_inputs
from derive.verify.reference import _Scope, _step, value

OPS = Path(__file__).resolve().parents[2] / "ops"
# op -> the blocks it must have: the softmax in attention, the normalisations, log-softmax
EXPECTED = {
    "causal_self_attention": {"scores": "probs", "counts": "probs"},
    "layernorm": {"x": "xhat", "diff": "xhat"},
    "batchnorm": {"x": "bnraw", "bndiff": "bnraw", "bndiff2": "bnvar_inv"},
    "sequence_cross_entropy": {
        "logits": "logprobs",
        "norm_logits": "logprobs",
        "counts": "logprobs",
    },
    "exercise": {"hprebn": "bnraw", "bndiff": "bnraw", "bndiff2": "bnvar_inv"},
}
SIZES = {"B": 2, "T": 4, "C": 8, "N": 5, "M": 3, "V": 6, "H": 7, "E": 3, "K": 4, "D": 2}


def _inputs(d: Derivation, gen: torch.Generator) -> dict[str, torch.Tensor]:
    g, out = d.adjoints.graph, {}
    for name in g.inputs:
        t = g.tensors[name]
        dims = [2] if t.batched else []
        for dim in t.dims[1:] if t.batched else t.dims:
            dim = sp.sympify(dim)
            dims.append(int(dim.subs({s: SIZES[s.name] for s in dim.free_symbols})))
        if t.integer:
            out[name] = torch.randint(0, 3, dims, generator=gen)
        else:
            out[name] = torch.randn(dims, generator=gen, dtype=torch.float64)
    return out


@pytest.mark.parametrize("op", sorted(EXPECTED))
def test_block_forms_match_autograd(op: str) -> None:
    d = derive(parse(load_op(OPS / f"{op}.py")))
    g, adj = d.adjoints.graph, d.adjoints
    assert {x: y for x, (y, _) in d.blocks.items()} == EXPECTED[op]
    gen = torch.Generator().manual_seed(0)
    sizes, values, _ = bind_inputs(g, _inputs(d, gen))
    for step in g.steps:
        values[step.name] = _step(_Scope(g, sizes, values, torch.float64, None), step)
    for x, (y, expr) in d.blocks.items():
        leaf = values[x].detach().clone().requires_grad_(True)
        again = {**values, x: leaf}
        names = [s.name for s in g.steps]
        for step in g.steps[names.index(x) + 1 if x in names else 0 :]:
            again[step.name] = _step(_Scope(g, sizes, again, torch.float64, None), step)
            if step.name == y:
                break
        dy = torch.randn(again[y].shape, generator=gen, dtype=torch.float64)
        (want,) = torch.autograd.grad((again[y] * dy).sum(), leaf)
        s = _Scope(g, sizes, {**values, adj.names[y]: dy}, torch.float64, None)
        free = adj.free[x]
        for i, n in zip(free, leaf.shape, strict=True):
            s.ranges[i] = (0, n)
        got, axes = value(expr, s)
        got = got.reshape(got.shape + (1,) * (len(free) - len(axes)))
        got = got.permute([(*axes, *[i for i in free if i not in axes]).index(i) for i in free])
        assert torch.allclose(got.expand(want.shape), want, atol=1e-10, rtol=0), (op, x, y)


def test_no_block_where_another_tensor_enters() -> None:
    # attention's q is read with k into scores: no function of q alone reaches y
    g = parse(load_op(OPS / "causal_self_attention.py"))
    assert block_output(g, "q") is None and block_output(g, "x") is None
    # softmax's chain ends at the op's output: its collapse to grad_out is the block form
    assert block_output(parse(load_op(OPS / "softmax.py")), "logits") is None
