"""Work under a gate is a tensor of its own axes, contracted with the reads the gate lets go.

A retention layer (RetNet) decays its causal scores by ``gamma[h]**(t - s)``:
``out[b, h, t, d] = sum_s where(s <= t, gamma[h]**(t - s) S[b, h, t, s] v[b, h, s, d], 0)``.
With tensors under the gate beside the decay, the forward was the (B, H, T, T, D) product of
all three, summed over s (24x autograd's time, found probing); now ``where(s <= t, g S, 0)``
is a (B, H, T, T) tensor and ``@ v`` (``reductions._gates_apart``). The gates of a nested
sum come apart too, before a contraction flattens the nest: dq, ``sum_d grad_out sum_s
where(s <= t, g v, 0) k``, was a (B, H, T, D, D) einsum, and the decay's gradient a (B, T, T,
D) product. The reference is autograd through plain torch (float64); the widest tensor
counted through a dispatch mode.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from tests.modules.emitted import against_autograd, imported

DT = torch.float64


def _retention(q, k, v, gam):
    t = q.shape[2]
    at = torch.arange(t, dtype=DT)
    lag = at[:, None] - at[None, :]
    decay = torch.where(lag >= 0, gam[:, None, None] ** lag.clamp(min=0), torch.zeros((), dtype=DT))
    return ((q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]) * decay) @ v


def test_a_decayed_causal_product_is_a_matmul(tmp_path: Path) -> None:
    path = tmp_path / "retention.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='retention', inputs=['q[B, H, T, D]', 'k[B, H, T,"
        " D]', 'v[B, H, T, D]', 'gam[H]'], ranges={'t': 'T'}, definitions=['out[b, h, t, d] ="
        " Sum(where(s <= t, gam[h]**(t - s) * Sum(q[b, h, t, e] * k[b, h, s, e], e) / sqrt(D)"
        " * v[b, h, s, d], 0), s)'])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(6)
    args = [torch.randn(2, 3, 9, 4, generator=gen, dtype=DT) for _ in range(3)]
    args.append(torch.rand(3, generator=gen, dtype=DT) * 0.5 + 0.4)
    generated, autograd = against_autograd(module, args, _retention, gen)
    # the forward's (B, H, T, T, D) product was 1,944 entries, dq's (B, H, T, D, D) 864
    assert generated <= autograd, (generated, autograd)


def test_a_decay_gradient_contracts_before_its_gate(tmp_path: Path) -> None:
    path = tmp_path / "decay.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='decay', inputs=['a[B, T, T]', 'v[B, T, D]',"
        " 'gam'], ranges={'t': 'T'}, definitions=['out[b, t, d] = Sum(where(s <= t, gam**(t -"
        " s) * a[b, t, s] * v[b, s, d], 0), s)'])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(7)
    a, v = torch.randn(2, 8, 8, generator=gen, dtype=DT), torch.randn(
        2, 8, 5, generator=gen, dtype=DT
    )
    gam = torch.tensor(0.7, dtype=DT)
    at = torch.arange(8, dtype=DT)
    lag = at[:, None] - at[None, :]

    def decayed(a, v, gam):
        return (torch.where(lag >= 0, gam ** lag.clamp(min=0), torch.zeros((), dtype=DT)) * a) @ v

    generated, autograd = against_autograd(module, [a, v, gam], decayed, gen)
    # dgam's (B, T, T, D) product was 640 entries against autograd's 128
    assert generated <= autograd, (generated, autograd)
