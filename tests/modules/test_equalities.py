"""An equality between int data and an index, ``where(seg[n] == g, x[n, d], 0)``, lowered as
the scatter and gather it is (derive/lower/equalities.py), checked at the entries no draw of
``derive check`` makes: data outside the axis it is compared with (a -1 padding segment, a
destination past the last node). Such an entry matches no index: it adds nothing forward,
and its row's gradient is 0. The references are dense equality masks written from the
definitions in plain torch, so the scatter, its clamp and its guard are checked against
the math, not against themselves: forward, gradient, double backward and tangent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.func import jvp

from bench.widest import Widest
from tests.modules.emitted import imported

CASES = Path(__file__).resolve().parents[1] / "cases"
DT = torch.float64


def _segment_reference(x: torch.Tensor, seg: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    mask = (seg[:, None] == torch.arange(b.shape[0])).to(DT)  # (N, G): no row for -1 or G
    s = b + mask.T @ x
    c = mask.sum(0)
    return torch.tanh(s) / (1 + c)[:, None]


def _messages_reference(x, src, dst, W):
    h = x[src] @ W
    mask = (dst[:, None] == torch.arange(x.shape[0])).to(DT)
    return torch.relu(mask.T @ h)


def _segment_inputs() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(9, 4, generator=gen, dtype=DT)
    seg = torch.tensor([0, -1, 2, 5, 2, 0, 3, -7, 1])  # G = 4: -1, 5 and -7 are no segment
    b = torch.randn(4, 4, generator=gen, dtype=DT)
    return x, seg, b


def _messages_inputs() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(5, 3, generator=gen, dtype=DT)
    src = torch.tensor([0, 1, 2, 3, 4, 4, 1, 0])
    dst = torch.tensor([1, -1, 2, 5, 0, 1, 4, 3])  # V = 5: -1 and 5 reach no node
    W = torch.randn(3, 6, generator=gen, dtype=DT)
    return x, src, dst, W


def _two_layers_reference(x, src, dst, W):
    mask = (dst[:, None] == torch.arange(x.shape[0])).to(DT)  # (E, V): no column for -1, V
    h1 = torch.relu(x + mask.T @ x[src])
    h2 = h1 @ W
    return torch.tanh(h2 + mask.T @ h2[src])


def _two_layers_inputs() -> tuple[torch.Tensor, ...]:
    x, src, dst, _ = _messages_inputs()
    W = torch.randn(3, 4, generator=torch.Generator().manual_seed(6), dtype=DT)
    return x, src, dst, W


def _offset_reference(x, k, b):
    mask = (k[:, None] == torch.arange(b.shape[0]) + 1).to(DT)  # k[n] == g + 1
    return b + mask.T @ x


def _offset_inputs() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(8, 3, generator=gen, dtype=DT)
    k = torch.tensor([0, 1, 4, 5, -1, 2, 3, 9])  # G = 4: 0, 5, -1 and 9 are no g + 1
    b = torch.randn(4, 3, generator=gen, dtype=DT)
    return x, k, b


CASES_AND_REFERENCES = [
    ("segment_sums.py", _segment_reference, _segment_inputs, (0, 2)),
    ("gnn_messages.py", _messages_reference, _messages_inputs, (0, 3)),
    ("segment_at_an_offset.py", _offset_reference, _offset_inputs, (0, 2)),
    ("gnn_two_layers.py", _two_layers_reference, _two_layers_inputs, (0, 3)),
]


@pytest.mark.parametrize(("case", "reference", "inputs", "floats"), CASES_AND_REFERENCES)
def test_data_outside_the_axis_adds_nothing(case, reference, inputs, floats, tmp_path) -> None:
    module, _ = imported(CASES / case, tmp_path)
    args = inputs()
    want = reference(*args)
    out, saved = module.forward(*args)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-14)
    grad_out = torch.randn(want.shape, generator=torch.Generator().manual_seed(7), dtype=DT)
    leaves = [a.clone().requires_grad_() if k in floats else a for k, a in enumerate(args)]
    want_grads = torch.autograd.grad(reference(*leaves), [leaves[k] for k in floats], grad_out)
    grads = module.backward(grad_out, saved)
    for k, want_grad in zip(floats, want_grads, strict=True):
        torch.testing.assert_close(grads[k], want_grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("case", "reference", "inputs", "floats"), CASES_AND_REFERENCES)
def test_second_order_and_tangent_outside_the_axis(case, reference, inputs, floats, tmp_path):
    module, _ = imported(CASES / case, tmp_path)
    args = inputs()
    gen = torch.Generator().manual_seed(8)

    def through(f):
        def run(*floats_in):
            full = list(args)
            for k, v in zip(floats, floats_in, strict=True):
                full[k] = v
            return f(*full)

        return run

    ours, theirs = through(module.Function.apply), through(reference)
    primals = [args[k] for k in floats]
    tangents = [torch.randn(p.shape, generator=gen, dtype=DT) for p in primals]
    got = jvp(ours, tuple(primals), tuple(tangents))
    want = jvp(theirs, tuple(primals), tuple(tangents))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    # the double backward: the gradient of <grad, v> in every float input and the cotangent
    cot = torch.randn(want[0].shape, generator=gen, dtype=DT)
    results = []
    for f in (ours, theirs):
        leaves = [p.clone().requires_grad_() for p in primals]
        w = cot.clone().requires_grad_()
        grads = torch.autograd.grad(f(*leaves), leaves, w, create_graph=True)
        total = sum((g * t).sum() for g, t in zip(grads, tangents, strict=True))
        results.append(torch.autograd.grad(total, [*leaves, w], allow_unused=True))
    for a, b in zip(*results, strict=True):
        if a is None or b is None:
            assert (a is None or not a.any()) and (b is None or not b.any())
            continue
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_a_segment_maximum_and_its_argmax_are_the_dense_forms(tmp_path: Path) -> None:
    """``out[g, k] = Max(where(seg[n] == g, x[n, k], -inf), n)`` is one scatter_reduce
    (``maxes.segment_max``), where the where() laid out over (G, K, N) was 511x autograd's
    time (found surveying). Its maximum and argmax are the dense form's, entry for entry, at
    every case the scatter treats apart: ties (the first n), a NaN (the first NaN), entries
    of -inf, an empty segment (-inf, argmax 0), data outside the axis (no segment). The
    reference is the dense where() over (G, K, N) and torch's max, written here; the gradient
    flows to that argmax's row."""
    path = tmp_path / "segmax.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='segmax', inputs=['x[N, K]', 'seg[N]: int64'],"
        " sizes={'G': '5'}, ranges={'g': 'G'}, definitions=['out[g, k] = Max(where(seg[n] == g,"
        " x[n, k], -inf), n)'])\n"
    )
    module, _ = imported(path, tmp_path)
    inf, nan = float("inf"), float("nan")
    x = torch.tensor(
        [[1.0, -inf], [3.0, 2.0], [3.0, nan], [-2.0, -inf], [7.0, nan], [0.5, 4.0], [9.0, 1.0]],
        dtype=DT,
    )
    seg = torch.tensor([0, 0, 0, 2, -1, 2, 5])  # G = 5: 1, 3 and 4 empty; -1 and 5 no segment
    dense = torch.where(seg == torch.arange(5)[:, None, None], x.T, -inf)
    want, want_at = dense.max(2)
    with Widest() as widest:
        out, saved = module.forward(x, seg)
    assert widest.entries < dense.numel(), widest.entries  # no (G, K, N) tensor
    torch.testing.assert_close(out, want, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(saved[module.SAVED.index("out_argmax")], want_at)
    grad_out = torch.randn(5, 2, dtype=DT, generator=torch.Generator().manual_seed(1))
    dx, _ = module.backward(grad_out, saved)
    expected = torch.zeros_like(x)
    for g in range(5):
        for k in range(2):
            n = want_at[g, k]
            if seg[n] == g:
                expected[n, k] += grad_out[g, k]
    torch.testing.assert_close(dx, expected, rtol=0, atol=0)


def test_the_two_layer_gnn_contracts_w_before_it_scatters(tmp_path: Path) -> None:
    """The two-layer GNN's dx sums ``sum_f W[d, f] sum_e1 mask[e1, d] [dst[e] == src[e1]]
    g[dst[e1], f]``: summed as written, the inner sum carried f, an (E, D, F) product
    scattered over the nodes before W contracted F (86 ms against autograd's 11.7 at V 2000,
    E 20000, D F 16; found probing). The outer sum goes inside, where f meets g alone
    (``assign.summed_where_met``): ``g[dst] @ W.T``, (E, D). At E 8, D 3, F 4 the widest
    tensor of the backward stays within (E + V, D) rows of D, where the (E, D, F) was 96."""
    module, _ = imported(CASES / "gnn_two_layers.py", tmp_path)
    args = _two_layers_inputs()
    out, saved = module.forward(*args)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(8), dtype=DT)
    with Widest() as widest:
        grads = module.backward(grad_out, saved, needs=(True, False, False, False))
    leaves = [a.clone().requires_grad_() if k == 0 else a for k, a in enumerate(args)]
    (want,) = torch.autograd.grad(_two_layers_reference(*leaves), leaves[0], grad_out)
    torch.testing.assert_close(grads[0], want, rtol=1e-12, atol=1e-14)
    assert widest.entries < 8 * 3 * 4, widest.entries


def test_a_segment_softmax_shift_leaves_no_argmax(tmp_path: Path) -> None:
    """A softmax over each segment, shifted by the segment's maximum: the shift cancels, so
    its adjoint is 0 and the backward reads no argmax (``simplify._equal_reads``). The
    gradient is checked against autograd through a dense form written here, with empty
    segments (1 and 4) and a segment's maximum tied."""
    module, _ = imported(CASES / "segment_softmax_scaled.py", tmp_path)
    assert not any(name.endswith("argmax") for name in module.SAVED), module.SAVED
    gen = torch.Generator().manual_seed(9)
    s = torch.randn(7, 2, generator=gen, dtype=DT)
    s[4, 0] = s[3, 0] = s[2:5, 0].max()  # a tie at segment 2's maximum
    seg = torch.tensor([0, 0, 2, 2, 2, 3, 0])
    b = torch.randn(5, 2, generator=gen, dtype=DT)
    grad_out = torch.randn(7, 2, generator=gen, dtype=DT)

    def dense(s, b):
        mask = seg[:, None] == torch.arange(5)  # (N, G)
        m = torch.where(mask[:, :, None], s[:, None, :], -torch.inf).amax(0)
        ex = torch.exp(s - m[seg])
        den = mask.to(DT).T @ ex
        return b[seg] * ex / den[seg]

    out, saved = module.forward(s, seg, b)
    leaves = (s.clone().requires_grad_(), b.clone().requires_grad_())
    want = dense(*leaves)
    torch.testing.assert_close(out, want.detach(), rtol=1e-13, atol=1e-15)
    want_ds, want_db = torch.autograd.grad(want, leaves, grad_out)
    ds, _, db = module.backward(grad_out, saved)
    torch.testing.assert_close(ds, want_ds, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(db, want_db, rtol=1e-12, atol=1e-14)


def test_graph_attention_sums_each_nodes_edges_once(tmp_path: Path) -> None:
    """Graph attention's aggregation (``tests/cases/gat_softmax.py``): the softmax adjoint of
    an edge reads its node through ``Sum_v where(dst[e] == v, g[v] / den[v]**2 ..)``, solved
    at v = dst[e] (the gather rule). Inside it stands a sum over the node's other edges,
    ``Sum_e1 where(dst[e1] == dst[e], ..)``: an equality of data against data only once the
    outer sum is solved, and it was lowered as written, an (E, K, E, D) mask and product
    (167x autograd's time at V 200, E 1000; out of memory at V 2000, E 20000). Now the rule
    runs again on what the solved sum leaves and on every sum the lowering meets: a scatter
    over the nodes, read back at dst. Checked against autograd through a dense form written
    here, with a node no edge reaches and a tied maximum; the backward's widest tensor stays
    within (E, K, D), where the product held E times that."""
    module, _ = imported(CASES / "gat_softmax.py", tmp_path)
    # the shift by each node's maximum is proven unseen (derive/symbolic/shifts.py)
    assert not any(name.endswith("argmax") for name in module.SAVED), module.SAVED
    E, V, K, D = 12, 5, 2, 3
    gen = torch.Generator().manual_seed(11)
    s = torch.randn(E, K, generator=gen, dtype=DT)
    m = torch.randn(V, K, D, generator=gen, dtype=DT)
    src = torch.randint(0, V, (E,), generator=gen)
    dst = torch.tensor([0, 1, 1, 2, 0, 3, 1, 3, 3, 0, 2, 1])  # node 4 receives nothing
    s[6, 0] = s[2, 0] = s[[1, 2, 6, 11], 0].max()  # a tie at node 1's maximum
    grad_out = torch.randn(V, K, D, generator=gen, dtype=DT)

    def dense(s, m):
        mask = dst[:, None] == torch.arange(V)  # (E, V)
        mx = torch.where(mask[:, :, None], s[:, None, :], -torch.inf).amax(0)
        ex = torch.exp(s - mx[dst])
        den = mask.to(DT).T @ ex
        den = torch.where(den > 0, den, 1)  # node 4's 0: no NaN through the where's gradient
        weights = torch.where(mask[:, :, None], ex[:, None, :] / den, 0)  # (E, V, K)
        return torch.einsum("evk,ekd->vkd", weights, m[src])

    out, saved = module.forward(s, m, src, dst)
    leaves = (s.clone().requires_grad_(), m.clone().requires_grad_())
    want = dense(*leaves)
    torch.testing.assert_close(out, want.detach(), rtol=1e-13, atol=1e-15)
    want_ds, want_dm = torch.autograd.grad(want, leaves, grad_out)
    with Widest() as widest:
        ds, dm, _, _ = module.backward(grad_out, saved)
    torch.testing.assert_close(ds, want_ds, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(dm, want_dm, rtol=1e-12, atol=1e-14)
    assert widest.entries <= E * K * D, widest.entries


def test_a_gathered_read_is_contracted_with_its_neighbours(tmp_path: Path) -> None:
    """``tests/cases/weighted_messages.py``: dx sums ``a[e, k] sum_d W[f, k, d] g[dst[e], k,
    d]`` over k. The nested sum over d was kept whole because ``g[dst[e], ..]`` is a gathered
    read, and became a batched product over k, (E, F, K) entries, multiplied by a and summed;
    flattened with its plain neighbours, it is ``a g[dst]`` over (E, K, D) and one matmul over
    (k, d). Checked against autograd through a dense form; the backward's widest tensor stays
    within (E, K, D) and (E, F), where the nest held E F K."""
    module, _ = imported(CASES / "weighted_messages.py", tmp_path)
    E, V, F, K, D = 12, 5, 8, 4, 2
    gen = torch.Generator().manual_seed(13)
    x = torch.randn(V, F, generator=gen, dtype=DT)
    W = torch.randn(F, K, D, generator=gen, dtype=DT)
    a = torch.randn(E, K, generator=gen, dtype=DT)
    src = torch.randint(0, V, (E,), generator=gen)
    dst = torch.randint(0, V, (E,), generator=gen)
    grad_out = torch.randn(V, K, D, generator=gen, dtype=DT)

    def dense(x, W, a):
        mask = (dst[:, None] == torch.arange(V)).to(DT)  # (E, V)
        h = torch.einsum("vf,fkd->vkd", x, W)
        return torch.einsum("ev,ek,ekd->vkd", mask, a, h[src])

    out, saved = module.forward(x, W, a, src, dst)
    leaves = (x.clone().requires_grad_(), W.clone().requires_grad_(), a.clone().requires_grad_())
    want = dense(*leaves)
    torch.testing.assert_close(out, want.detach(), rtol=1e-13, atol=1e-15)
    wants = torch.autograd.grad(want, leaves, grad_out)
    with Widest() as widest:
        grads = module.backward(grad_out, saved)
    for got, expected in zip(grads, wants, strict=False):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-14)
    assert widest.entries <= max(E * K * D, E * F), widest.entries
