"""One op, one expected emitted line, per lowering rule and per row of the fusion table (exact
strings, as SymPy's printer tests do); the numbers behind them are checked in
tests/modules/test_check.py. Each fusion's match is also checked to decide without lowering
anything.
"""

from __future__ import annotations

import runpy

import pytest
import sympy as sp

from derive import Op
from derive.emit.generate import module_source
from derive.errors import EngineBug
from derive.functions import clamp, heaviside_code, where
from derive.ir import nodes as ir
from derive.ir.printer import TorchPrinter
from derive.lower.assign import assign, delta_form
from derive.lower.context import Context
from derive.lower.fusions import FUSIONS
from derive.lower.indexing import affine_value
from derive.lower.lowerer import Lowerer
from derive.lower.value import align, delta_terms, dense_axes, natural_order, union


@pytest.fixture(autouse=True)
def _as_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines as the lowering writes them: the last pass, which writes kernels into their
    spare operands (``_into``, derive/ir/reuse.py), changes where results go and not what is
    computed; tests/unit/test_reuse.py holds its lines, tests/modules/test_into.py its values."""
    monkeypatch.setattr("derive.lower.lowerer.into_operands", lambda block, integers: block)


def _lines(inputs: list[str], definitions: list[str], **kw) -> list[str]:
    text = module_source(Op("t", inputs, definitions, **kw), "out")
    return [line.strip() for line in text.splitlines()]


@pytest.mark.parametrize(
    ("inputs", "definitions", "line"),
    [
        # contraction over the shared axis, in the target's axis order, whatever the names
        (["x[N, I]", "z[N, J]"], ["out[i, j] = Sum(x[n, i] * z[n, j], n)"], "out = x.T @ z"),
        (["a[I, J]", "b[J, M]"], ["out[i, m] = Sum(a[i, j] * b[j, m], j)"], "out = a @ b"),
        # bias + matmul -> addmm
        (
            ["x[N, D]", "W[D, M]", "b[M]"],
            ["out[n, m] = Sum(x[n, k] * W[k, m], k) + b[m]"],
            "out = torch.addmm(b, x, W)",
        ),
        # Sum / extent -> mean
        (["x[N, M]"], ["out[m] = Sum(x[n, m], n) / N"], "out = _sum_leading(x, 1, mean=True)"),
        # a product over permuted axes: each operand permuted to the target's order
        (
            ["Zz[G, M]", "h[M, T]"],
            ["out[t, m, g] = Zz[g, m] * h[m, t]"],
            "out = Zz.T * h.T[:, :, None]",
        ),
        # a gather in the last position
        (
            ["z[N, C]", "t[N]: int64"],
            ["out[n] = z[n, t[n]]"],
            "out = z.gather(1, t.unsqueeze(1)).squeeze(1)",
        ),
        # a gather in a middle position: advanced indexing
        (
            ["x[I, C, S]", "t[I, S]: int64"],
            ["out[i, s] = x[i, t[i, s], s]"],
            "out = x[torch.arange(I, device=x.device)[:, None], t, torch.arange(S, device=x.device)]",  # noqa: E501
        ),
        # a diagonal
        (
            ["x[N, N]"],
            ["out[n] = x[n, n]"],
            "out = x[torch.arange(N, device=x.device), torch.arange(N, device=x.device)]",
        ),
        # rows picked by int data, then contracted: the picked rows once, then a matmul (a
        # broadcast product over n, k, m before; found probing: 6x slower, 3x the memory)
        (
            ["Emb[V, K]", "W[K, M]", "idx[N]: int64"],
            ["out[n, m] = Sum(Emb[idx[n], k] * W[k, m], k)"],
            "out = _index_select(Emb, idx) @ W",
        ),
        (
            ["Emb[V, K]", "W[K, M]", "idx[N]: int64"],
            ["out[n, m] = Sum(Emb[idx[n], k] * W[k, m], k)"],
            "dW = _index_select(Emb, idx).T @ grad_out",
        ),
        # two gathers in one product: two reads, each a gather, then a matmul (a broadcast
        # N x P x K product before; found probing)
        (
            ["E[V, K]", "F[U, K]", "a[N]: int64", "b[P]: int64"],
            ["out[n, p] = Sum(E[a[n], k] * F[b[p], k], k)"],
            "out = _index_select(E, a) @ _index_select(F, b).T",
        ),
        (
            ["E[V, K]", "F[U, K]", "a[N]: int64", "b[P]: int64"],
            ["out[n, p] = Sum(E[a[n], k] * F[b[p], k], k)"],
            "sum_F_b_grad_out = grad_out @ _index_select(F, b)",
        ),
        # an embedding bag: the picked rows' adjoint is one index_add_ of grad_out expanded
        # over l (a (B, L, V) equality mask and a (V, B) matmul before; found probing: 89x
        # autograd's time at V = 50000)
        (
            ["E[V, D]", "idx[B, L]: int64"],
            ["out[b, d] = Sum(E[idx[b, l], d], l) / L"],
            "dE = _index_add(added.new_zeros((V, D)), 0, idx.reshape(B * L), added)",
        ),
        (
            ["E[V, D]", "w[B, L]", "idx[B, L]: int64"],
            ["out[b, d] = Sum(w[b, l] * E[idx[b, l], d], l)"],
            "dE = _index_add(added.new_zeros((V, D)), 0, idx.reshape(B * L), added)",
        ),
        # a segment sum: the equality of data and an index is one index_add_, an entry past
        # the axis added into a spare row cut off after; its adjoint a gather of grad_out
        # padded by a row of zeros (an (N, G, D) where() and an (N, G) mask's matmul
        # before; found probing: 212x autograd's time)
        (
            ["x[N, D]", "seg[N]: int64", "b[G, D]"],
            ["out[g, d] = b[g, d] + Sum(where(seg[n] == g, x[n, d], 0), n)"],
            "sum_seg_x = _index_add(x.new_zeros((G + 1, D)), 0, seg_or_G, x)",
        ),
        (
            ["x[N, D]", "seg[N]: int64", "b[G, D]"],
            ["out[g, d] = b[g, d] + Sum(where(seg[n] == g, x[n, d], 0), n)"],
            "dx = _index_select(torch.nn.functional.pad(grad_out, (0, 0, 0, 1)), seg_or_G)",
        ),
        (
            ["x[N, D]", "seg[N]: int64", "b[G, D]"],
            ["out[g, d] = b[g, d] + Sum(where(seg[n] == g, x[n, d], 0), n)"],
            "seg_or_G = torch.where((seg >= 0) & (seg <= (G - 1)), seg, G)",
        ),
        # an equality at an offset, k[n] == g + 1: the positions k - 1, sent past the axis
        # where they leave it (an (N, G, D) where() before; found probing)
        (
            ["x[N, D]", "k[N]: int64", "b[G, D]"],
            ["out[g, d] = b[g, d] + Sum(where(k[n] == g + 1, x[n, d], 0), n)"],
            "k_or_G = torch.where((shared_k >= 0) & (shared_k <= (G - 1)), shared_k, G)",
        ),
        # the same data checked against the axis (a subscript of it too): read as it is
        (
            ["x[N, D]", "seg[N]: int64", "b[G, D]", "c[G]"],
            ["out[g, d] = b[g, d] + Sum(where(seg[n] == g, c[seg[n]] * x[n, d], 0), n)"],
            "sum_c_seg_x = _index_add(added.new_zeros((G, D)), 0, seg, added)",
        ),
        # a relative-position table's adjoint: the scores' adjoint (ds0, computed already)
        # summed over the batch first, then its diagonals read (gathered over the batch
        # first, a (B, TT, T) temporary; found probing: 27x autograd's time)
        (
            ["s0[B, T, T]", "tab[TT]"],
            ["out[b, t, s] = exp(s0[b, t, s] + tab[t - s + T - 1])"],
            "sum_grad_out_out = _sum_leading(ds0, 1)",
        ),
        # a SwiGLU's backward: grad_out @ W2.T is made once, for both gates' adjoints (an
        # addmm made it again; found probing), and a product that sums nothing is a product,
        # not an einsum "ac,ac->ac", made once for dx and dW3 (dW3 made it again transposed):
        # the gate's adjoint dbb, kept (derive/symbolic/cuts.py)
        (
            ["x[N, D]", "W1[D, F]", "W3[D, F]", "W2[F, M]"],
            [
                "a[n, f] = Sum(x[n, d] * W1[d, f], d)",
                "bb[n, f] = Sum(x[n, d] * W3[d, f], d)",
                "h[n, f] = a[n, f] * sigmoid(a[n, f]) * bb[n, f]",
                "out[n, m] = Sum(h[n, f] * W2[f, m], f)",
            ],
            "sum_W3_dbb = dbb @ W3.T",
        ),
        # an MLP written inline: the hidden sum under the relu is named and saved, and the
        # backward masks g @ W2.T with it (the mask with both weights was an N x D x M
        # product, found probing: 58x autograd's time; then the sum made again, 1.44x)
        (
            ["x[N, D]", "W1[D, F]", "W2[F, M]"],
            ["out[n, m] = Sum(relu(Sum(x[n, d] * W1[d, f], d)) * W2[f, m], f)"],
            "dout_sum0 = torch.where(out_sum0 > 0, sum_W2_grad_out, 0)",
        ),
        # a chain of three: contracted pair by pair, each pair a matmul, (a b) c or a (b c)
        # as the sizes at the call make fewer multiplies (I J K + I K L against I J L + J K L)
        (
            ["a[I, J]", "b[J, K]", "c[K, L]"],
            ["out[i, l] = Sum(a[i, j] * b[j, k] * c[k, l], j, k)"],
            "out = a @ b @ c if I * J * K + I * K * L <= I * J * L + J * K * L"
            " else a @ (c.T @ b.T).T",
        ),
        # A B v: B v first (J K + I J), not the I x K product A B that left-to-right builds;
        # each pair a matrix-vector product, so a matmul ((v B^T) A^T, python's left to right)
        (
            ["A[I, J]", "B[J, K]", "v[K]"],
            ["out[i] = Sum(A[i, j] * B[j, k] * v[k], j, k)"],
            "out = v @ B.T @ A.T",
        ),
        # the simplifier's nesting sum_l g[i,l] (sum_k b[j,k] c[k,l]) flattened: g c first
        # where that is fewer multiplies at the call
        (
            ["a[I, J]", "b[J, K]", "c[K, L]"],
            ["out[i, l] = Sum(a[i, j] * b[j, k] * c[k, l], j, k)"],
            "grad_out @ c.T @ b.T",
        ),
        # an index named like a tensor (g) is still an axis of the einsum (fuzz seed 1168)
        (
            ["g[G]", "emb[A, G, G]", "hid[A, G, G, G]"],
            ["out[m, t, i] = Sum(emb[t, c, m] * hid[t, c, r, i], c, r) + g[i]"],
            'demb = torch.einsum("cae,abde->abc", grad_out, hid)',
        ),
        # r + c a b -> addcmul; a function met twice is computed once
        (["x[N]"], ["out[n] = x[n] * tanh(x[n]) + tanh(x[n])"], "tanh_x = torch.tanh(x)"),
        # a python-number factor of addcmul's term (1/N, a size) goes into value=
        (
            ["x[N, C]", "y[N, C]", "z[N, C]"],
            ["out[n, c] = z[n, c] - x[n, c] * y[n, c] / N"],
            "out = _addcmul(z, y, x, -1 / N)",
        ),
        # r + c t -> _add_scaled(r, t, c): the scale rides in the add (torch.add's alpha)
        (["x[N]", "y[N]"], ["out[n] = x[n] + y[n] / N"], "out = _add_scaled(x, y, 1 / N)"),
        # (c x**2 + 1) x -> addcmul(x, x, x * x, value=c): x**3 kept as two factors
        (
            ["x[N]"],
            ["out[n] = (Rational(1, 3) * x[n]**2 + 1) * x[n]"],
            "out = _addcmul(x, x, x * x, 1 / 3)",
        ),
    ],
)
def test_emitted_line(inputs: list[str], definitions: list[str], line: str) -> None:
    assert line in _lines(inputs, definitions)


def test_a_pre_activation_is_saved_whole() -> None:
    # relu(Sum_d x W1 + b1): the backward's mask needs the relu's argument; named as a whole
    # (not the sum alone) the forward keeps its addmm and the mask adds no bias again
    lines = _lines(
        ["x[N, D]", "W1[D, F]", "b1[F]", "W2[F, M]"],
        [
            "h[n, f] = relu(Sum(x[n, d] * W1[d, f], d) + b1[f])",
            "out[n, m] = Sum(h[n, f] * W2[f, m], f)",
        ],
    )
    assert "h_in0 = torch.addmm(b1, x, W1)" in lines
    assert "dh_in0 = torch.where(h_in0 > 0, sum_W2_grad_out, 0)" in lines


def test_a_pair_summed_elsewhere_is_read_not_made_again() -> None:
    # dg = sum_{f,m} g_out[n, m] W2[e, f, m] h[n, e, f]: its pair sum_m g_out W2 is dh's too,
    # so dg reads it (was an einsum of all three, the N x E x F product made twice)
    inputs = ["x[N, D]", "W1[E, D, F]", "W2[E, F, M]", "g[N, E]"]
    definitions = [
        "h[n, e, f] = relu(Sum(x[n, d] * W1[e, d, f], d))",
        "out[n, m] = Sum(g[n, e] * h[n, e, f] * W2[e, f, m], e, f)",
    ]
    lines = _lines(inputs, definitions)
    assert "dg = (h * sum_W2_grad_out).sum(2)" in lines
    assert sum("grad_out @ W2" in line for line in lines) == 1


def test_pick_update_is_one_scatter_add() -> None:
    lines = _lines(["z[N, C]", "t[N]: int64"], ["out[n] = z[n, t[n]]"])
    assert "dz = _scatter_add(dz, 1, t.unsqueeze(1), grad_out.unsqueeze(1))" in lines


def test_one_hot_terms_split_off_without_multiplying_out_the_rest() -> None:
    # (1 - s) q delta: multiplied out, q - s q is a rounded difference where s saturates at
    # 1.0 and the product is 0 (fuzz --windows 12538); only sums holding a delta are split
    i, s, q, a, b = sp.symbols("i s q a b")
    d1, d2 = sp.KroneckerDelta(i, 1), sp.KroneckerDelta(i, 2)
    assert delta_terms((1 - s) * q * d1) == [(1 - s) * q * d1]
    assert set(delta_terms((1 - s) * (d1 * a + d2 * b))) == {(1 - s) * a * d1, (1 - s) * b * d2}
    assert delta_terms((1 - s) * q * d1 + a * d2 - a * d2) == [(1 - s) * q * d1]  # collected


def test_delta_without_a_scatter_form_is_an_equality_selection() -> None:
    # delta(n, m) g[n] is g where n == m, else 0: selected (torch.where), never multiplied
    # by a float mask, so an inf or NaN at the dropped positions stays out
    text = module_source(Op("t", ["x[N, N]"], ["out[n] = x[n, n]"]), "out")
    backward = text[text.index("def backward") :]
    assert "torch.where(" in backward and "==" in backward
    assert ".to(grad_out.dtype)" not in backward


@pytest.mark.parametrize(
    ("inputs", "definitions", "line"),
    [
        # the gate takes the computed factors in (0 * sinh(-inf) is the NaN to drop) ...
        (
            ["x[N, M]"],
            ["out[n] = Sum(where(m <= n, sinh(x[n, m]), 0), m)"],
            "dx = (grad_out[:, None] * torch.cosh(x)).masked_fill(",
        ),
        # ... and leaves a plain read over a further axis outside: the gate is taken on the
        # small tensor, the full-size product stays one pass (sequence cross-entropy's dlogits;
        # the condition, which dg reads too, computed once)
        (
            ["z[N, C]", "t[N]: int64", "g[N]"],
            ["out = Sum(where(t[n] >= 0, g[n], 0) * z[n, c] ** 2, n, c)"],
            "dz = (grad_out * 2 * torch.where(shared_t, g, 0))[:, None] * z",
        ),
    ],
)
def test_a_gate_selects(inputs: list[str], definitions: list[str], line: str) -> None:
    assert any(text.startswith(line) for text in _lines(inputs, definitions))


def test_a_gated_nan_is_dropped_as_autograd_drops_it() -> None:
    # the forward is finite (a masked -inf scores 0 through exp), and so must the backward be:
    # the 0/1 mask used to multiply inf * 0 = nan in (fuzz seed 160920)
    import torch

    namespace: dict = {}
    op = Op(
        "t",
        ["x[N, M]"],
        ["out[n] = Sum(exp(where(m <= n, x[n, m], -inf)) / cosh(where(m <= n, x[n, m], -inf)), m)"],
    )
    exec(compile(module_source(op, "out"), "t", "exec"), namespace)
    x = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    masked = torch.where(torch.ones(3, 3, dtype=torch.bool).tril(), x, float("-inf"))
    (torch.exp(masked) / torch.cosh(masked)).sum(1).sum().backward()
    out, saved = namespace["forward"](x.detach())
    (dx,) = namespace["backward"](torch.ones_like(out), saved)
    assert torch.isfinite(dx).all()
    torch.testing.assert_close(dx, x.grad)


def test_relu_derivative_is_the_step() -> None:
    # a selection, as torch's threshold backward: never a 0/1 mask multiplied in
    assert "dx = torch.where(x > 0, grad_out, 0)" in _lines(["x[N]"], ["out[n] = relu(x[n])"])


def test_a_kinks_derivative_drops_what_the_other_branch_overflows_as_autograd_does() -> None:
    # W = maximum(a, s): where s is the larger, a gets nothing of dW, even an inf or nan; the
    # 0/1 step contracted with the sum beside it made da nan (fuzz --range 891045)
    import torch

    namespace: dict = {}
    op = Op(
        "t",
        ["a[M]", "s[C, M]", "u[N]"],
        ["W[m, c] = maximum(a[m], s[c, m])", "out[n] = u[n] / Sum(exp(W[m, c]), m, c)"],
    )
    exec(compile(module_source(op, "out"), "t", "exec"), namespace)
    a = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
    s = torch.tensor([[800.0, 0.0], [0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    u = torch.ones(2, dtype=torch.float64, requires_grad=True)
    W = torch.maximum(a, s)
    (u / torch.exp(W).sum()).sum().backward()
    out, saved = namespace["forward"](a.detach(), s.detach(), u.detach())
    da, ds, du = namespace["backward"](torch.ones_like(out), saved)
    assert torch.isfinite(a.grad).all() and torch.isfinite(out).all()
    torch.testing.assert_close(da, a.grad, equal_nan=True)
    torch.testing.assert_close(ds, s.grad, equal_nan=True)


@pytest.mark.parametrize("at_zero", [sp.S.Zero, sp.S.One, sp.S.Half])
def test_step_of_a_number_is_python_with_sympys_value(at_zero: sp.Expr) -> None:
    # a step of a param (minimum(x, x + lo)'s derivative) is evaluated in python, as SymPy's
    # Heaviside(v, at_zero) is at every sign of v, zero included
    code = heaviside_code("(v)", at_zero, None)
    for v in (-2.5, 0.0, 3.0):
        assert eval(code, {"v": v}) == float(sp.Heaviside(v, at_zero)), (code, v)


# -- selections (issue 13): where(), index comparisons, constant subscripts, stacks --------------
SELECTIONS = [
    # an index comparison is a triangle of ones over its two axes; where() against a number is
    # a masked_fill with the other triangle (derive/ir/triangles.py)
    (
        ["x[N, M]"],
        ["out[n, m] = exp(where(m <= n, x[n, m], -inf))"],
        'x.masked_fill(torch.ones(N, M, dtype=torch.bool, device=x.device).triu(1), float("-inf"))',
    ),
    # a comparison on int data; the derivative where(c, 1, 0) times a tensor selects it
    (
        ["x[N]", "t[N]: int64"],
        ["out[n] = where(t[n] >= 0, x[n], 0)"],
        "out = torch.where(t >= 0, x, 0)",
    ),
    (
        ["x[N]", "t[N]: int64"],
        ["out[n] = where(t[n] >= 0, x[n], 0)"],
        "dx = torch.where(t >= 0, grad_out, 0)",
    ),
    # ... and on numbers alone it is the mask as the float dtype
    (
        ["x[N]", "t[N]: int64"],
        ["out = Sum(where(t[n] >= 0, x[n], 0), n)"],
        "dx = grad_out * (t >= 0).to(grad_out.dtype)",
    ),
    # a constant subscript is a slice (a view), the size inside a product is solved
    (
        ["x[N, 3*M]"],
        ["y = view(x, N, 3, M)", "out[n, m] = y[n, 1, m] * y[n, 2, m]"],
        "out = y[:, 1] * y[:, 2]",
    ),
    (
        ["x[N, 3*M]"],
        ["y = view(x, N, 3, M)", "out[n, m] = y[n, 1, m] * y[n, 2, m]"],
        'M = _check_derived("M", "x.shape[1] / 3", x.shape[1], 3, "x.shape[1]", "3")',
    ),
    # ...and the gradient of a view of an input is the view's, reshaped, under the input's name
    (
        ["x[N, 3*M]"],
        ["y = view(x, N, 3, M)", "out[n, m] = y[n, 1, m] * y[n, 2, m]"],
        "dx = dy.reshape(N, 3 * M)",
    ),
    # an element-wise factor of a contraction is computed once, then contracted by matmul
    # (abs: a cheap call, recomputed; exp would be lifted and saved as a tensor of its own)
    (["x[N, K]", "W[K, M]"], ["out[n, m] = Sum(abs(x[n, k]) * W[k, m], k)"], "out = t_x @ W"),
    # an index summed on one side only rides in the einsum
    (
        ["W[M, K]", "g[N, K]"],
        ["out[m] = Sum(W[m, k] * g[n, k], n, k)"],
        'out = torch.einsum("ac,bc->a", W, g)',
    ),
    # sqrt of a size is one python float
    (["x[N]"], ["out[n] = x[n] / sqrt(N)"], "out = x / math.sqrt(N)"),
    # a number's coefficient is folded into it: one float rounded once, no python arithmetic
    (["x[N]"], ["out[n] = 2 * sqrt(2 / pi) * x[n]"], "out = x * 1.5957691216057308"),
    (["x[N]"], ["out[n] = -x[n] * sqrt(2) / 3"], "out = x * (-0.4714045207910317)"),
]


@pytest.mark.parametrize(("inputs", "definitions", "line"), SELECTIONS)
def test_selection_line(inputs: list[str], definitions: list[str], line: str) -> None:
    assert line in _lines(inputs, definitions)


def test_constant_subscript_adjoints_are_one_stack() -> None:
    lines = _lines(["x[N, 3*M]"], ["y = view(x, N, 3, M)", "out[n, m] = y[n, 1, m] * y[n, 2, m]"])
    assert (
        "dy = torch.stack([grad_out.new_zeros((N, M)), grad_out * y[:, 2], grad_out * y[:, 1]], 1)"
        in lines
    )


def test_derived_size_is_bound_and_checked() -> None:
    lines = _lines(
        ["x[N, C]"],
        ["y = view(x, N, H, D)", "out[n, h] = Sum(y[n, h, d], d)"],
        params={"k": 2},
        sizes={"H": "k", "D": "C / k"},
    )
    assert 'D = _check_derived("D", "C / k", C, k, "C", "k")' in lines
    assert "def forward(x, *, k=2):" in lines


def test_an_index_guarded_by_where_is_read_clamped() -> None:
    # where(t[n] >= 0, x[n, t[n]], 0): a -1 in t is ignored, never read out of range
    inputs, defs = ["x[N, C]", "t[N]: int64"], ["out = Sum(where(t[n] >= 0, x[n, t[n]], 0), n)"]
    lines = _lines(inputs, defs)
    assert (
        "out = torch.where(t >= 0, x.gather(1, t.clamp(min=0).unsqueeze(1)).squeeze(1), 0).sum(0)"
        in lines
    )
    assert '_check_range("t", t, "C", C, before=True, guarded=True)' in lines
    # the buffer is made like what it adds (batched under vmap where that is)
    assert "added = grad_out * (t >= 0).to(grad_out.dtype)" in lines
    assert "dx = _scatter_add(dx, 1, t.clamp(min=0).unsqueeze(1), added.unsqueeze(1))" in lines


@pytest.mark.parametrize(
    "body",
    [
        "where(0 <= t[n], x[n, t[n]], 0)",
        "where(-1 < t[n], x[n, t[n]], 0)",
        "where(t[n] >= 1, x[n, t[n]], 0)",
        "where(t[n] < 0, 0, x[n, t[n]])",
        "where(t[n] <= -1, 0, x[n, t[n]])",
        # whole numbers on the read's side (found by probing: refused -1 at every call)
        "where(t[n] + 1 > 0, x[n, t[n]], 0)",
        "where(1 - t[n] < 2, x[n, t[n]], 0)",
        # a call on the pick stays under its guard, not lifted into a definition to be saved
        # (derive/symbolic/saving.py): lifted, it read every ignored -1, refused at each call
        "where(t[n] >= 0, exp(x[n, t[n]]), 0)",
    ],
)
def test_a_guard_written_any_way_reads_the_index_clamped(body: str) -> None:
    """Each of these proves t[n] >= 0 where x[n, t[n]] is read (found by probing: only
    ``t[n] >= 0`` and ``t[n] > -1`` were known, and the module refused every ignored -1 as
    outside the axis)."""
    lines = _lines(["x[N, C]", "t[N]: int64"], [f"out = Sum({body}, n)"])
    assert '_check_range("t", t, "C", C, before=True, guarded=True)' in lines
    assert any("t.clamp(min=0)" in line for line in lines)


def test_a_condition_that_admits_a_negative_index_is_no_guard() -> None:
    """``t[n] >= -1`` would read a -1: each entry is checked whole."""
    lines = _lines(["x[N, C]", "t[N]: int64"], ["out = Sum(where(t[n] >= -1, x[n, t[n]], 0), n)"])
    assert '_check_range("t", t, "C", C, before=True)' in lines
    assert not any("clamp" in line for line in lines)


@pytest.mark.parametrize(
    "body",
    [
        "where(t[n] != -1, x[n, t[n]], 0)",
        "where(-1 != t[n], x[n, t[n]], 0)",
        "where(t[n] != -1, exp(x[n, t[n]]), 0)",
        "where(t[n] == -1, 0, x[n, t[n]])",
        "where(-1 == t[n], 0, x[n, t[n]])",
        "where(t[n] + 1 != 0, x[n, t[n]], 0)",
        "where(2 - t[n] == 3, 0, x[n, t[n]])",
    ],
)
def test_an_unequal_guard_ignores_exactly_its_value(body: str) -> None:
    """``t[n] != -1`` (cross-entropy's ignore_index as users write it) reads t clamped and
    admits -1, and no other value, outside the axis: on every device, before the kernels,
    since the clamp would read a -2 as 0 where no kernel refuses it. It was no guard, and
    every call with a -1 was refused as outside the axis (found writing ops as users do)."""
    lines = _lines(["x[N, C]", "t[N]: int64"], [f"out = Sum({body}, n)"])
    assert '_check_range("t", t, "C", C, ignored=(-1,))' in lines
    assert any("t.clamp(min=0)" in line for line in lines)


@pytest.mark.parametrize(
    ("definitions", "check"),
    [
        # a non-negative value is in the axis or refused with any other entry: no guard
        (["out = Sum(where(t[n] != 0, x[n, t[n]], 0), n)"], '"C", C, before=True)'),
        (["out = Sum(where(t[n] == -1, x[n, t[n]], 0), n)"], '"C", C, before=True)'),
        # two reads, each ignoring another value: a -1 is read by the second, a -2 by the first
        (
            ["out = Sum(where(t[n] != -1, x[n, t[n]], 0) + where(t[n] != -2, x[n, t[n]], 0), n)"],
            '"C", C, before=True)',
        ),
        # one read ignoring any negative, the other -1: only -1 is ignored by both
        (
            ["out = Sum(where(t[n] >= 0, x[n, t[n]], 0) + where(t[n] != -1, x[n, t[n]], 0), n)"],
            '"C", C, ignored=(-1,))',
        ),
        # nested: a read under both guards ignores what either does
        (
            ["out = Sum(where(t[n] != -100, where(t[n] >= 0, x[n, t[n]], 0), 0), n)"],
            '"C", C, before=True, guarded=True)',
        ),
        (["out = Sum(where(t[n] != -100, x[n, t[n]], 0), n)"], '"C", C, ignored=(-100,))'),
    ],
)
def test_what_each_read_ignores_is_what_the_check_admits(definitions, check) -> None:
    lines = _lines(["x[N, C]", "t[N]: int64"], definitions)
    assert f'_check_range("t", t, {check}' in lines, [ln for ln in lines if "_check_range" in ln]


def test_an_index_used_unguarded_anywhere_is_checked_whole() -> None:
    inputs = ["x[N, C]", "t[N]: int64"]
    defs = ["out[n] = where(t[n] >= 0, x[n, t[n]], 0) + x[n, t[n]]"]
    lines = _lines(inputs, defs)
    assert '_check_range("t", t, "C", C, before=True)' in lines
    assert not any("clamp" in line for line in lines)


def test_an_indicator_with_a_nonzero_else_is_one_parenthesised_sum() -> None:
    # d/dy where(m <= n, x, y) = where(m <= n, 0, 1) = mask * -1 + 1, bound as one term
    # (fuzz seed 1038: emitted `g * mask * 0 + 1 * ~mask`, the product's precedence). Beside
    # a tensor it selects (torch.where(c, 0, g)); summed with a 0-d grad_out it is the mask
    lines = _lines(["x[N, N]", "y[N]"], ["out = Sum(where(m <= n, x[n, m], y[m]), n, m)"])
    start = lines.index("sum_ = (")
    assert lines[start + 1].endswith(".to(grad_out.dtype)")
    assert lines[start + 2 : start + 5] == ["* -1", "+ 1", ").sum(1)"]
    assert "dy = grad_out * sum_" in lines


# One case per row of FUSIONS: the op, and the fused line its module must hold (then the
# op's declared sizes and ranges, where it has some).
FUSION_CASES = {
    "addmm": (
        ["x[N, D]", "W[D, M]", "b[M]"],
        ["out[n, m] = Sum(x[n, k] * W[k, m], k) + b[m]"],
        "out = torch.addmm(b, x, W)",
    ),
    "conv_bias": (
        ["x[N, C, T]", "w[O, C, K]", "b[O]"],
        ["out[n, o, t] = Sum(x[n, c, t + k] * w[o, c, k], c, k) + b[o]"],
        "out = torch.conv1d(x, w, b)",
        {"sizes": {"L": "T - K + 1"}, "ranges": {"t": "L"}},
    ),
    "addcmul": (
        ["x[N, M]", "y[N, M]", "z[N, M]"],
        ["out[n, m] = x[n, m] - 2 * y[n, m] * z[n, m]"],
        "out = _addcmul(x, z, y, -2)",
    ),
    "mean": (["x[N, M]"], ["out[m] = Sum(x[n, m], n) / N"], "out = _sum_leading(x, 1, mean=True)"),
    "distribute": (
        ["a[N]", "g[N]"],
        ["out[n] = (1 + a[n]) * g[n]"],
        "out = torch.addcmul(g, g, a)",
    ),
    "scatter_add": (
        ["z[N, C]", "t[N]: int64"],
        ["out[n] = z[n, t[n]]"],
        "dz = _scatter_add(dz, 1, t.unsqueeze(1), grad_out.unsqueeze(1))",
    ),
}


@pytest.mark.parametrize("name", [rule.name for rule in FUSIONS])
def test_fusion_emits_its_line(name: str) -> None:
    inputs, definitions, line, *declared = FUSION_CASES[name]
    assert line in _lines(inputs, definitions, **(declared[0] if declared else {}))


def test_every_fusion_has_its_case_and_identity() -> None:
    assert set(FUSION_CASES) == {rule.name for rule in FUSIONS}
    assert all("->" in rule.identity for rule in FUSIONS)


N, M, D = sp.symbols("N M D", integer=True, positive=True)
n, m, k = sp.symbols("n m k", integer=True)
x = sp.IndexedBase("x", shape=(N, M), real=True)
W = sp.IndexedBase("W", shape=(M, D), real=True)
b = sp.IndexedBase("b", shape=(D,), real=True)


def _lowerer() -> Lowerer:
    return Lowerer("t", {"x", "W", "b", "N", "M", "D"}, {}, scalars={"N", "M", "D"})


@pytest.mark.parametrize(
    ("rule", "expr", "order", "matches"),
    [
        ("addmm", b[k] + sp.Sum(x[n, m] * W[m, k], (m, 0, M - 1)), [n, k], True),
        # an element-wise factor is computed once, then the matmul takes the bias
        ("addmm", b[k] + sp.Sum(x[n, m] * W[m, k] ** 2, (m, 0, M - 1)), [n, k], True),
        # an index of one side alone summed too: one einsum, no matmul to take the bias
        ("addmm", b[k] + sp.Sum(x[n, m] * W[m, k], (m, 0, M - 1), (n, 0, N - 1)), [k], False),
        ("mean", sp.Sum(x[n, m], (n, 0, N - 1)) / N, [m], True),
        ("mean", sp.Sum(x[n, m], (n, 0, N - 1)) / (N - 1), [m], False),
        ("addcmul", x[n, m] + 3 * x[n, m] ** 2 * b[m], [n, m], True),
        ("addcmul", x[n, m] + N * M, [n, m], False),
    ],
)
def test_fusion_match_is_pure(rule: str, expr: sp.Expr, order: list, matches: bool) -> None:
    """A match decides on the expression alone: it lowers nothing, emits nothing, fills no
    memo, whether it matches or not."""
    lw = _lowerer()
    (fusion,) = [f for f in FUSIONS if f.name == rule]
    cx = lw.context
    found = fusion.match(expr, cx.scope(order))
    assert (found is not None) == matches
    assert cx.statements == [] and cx.memo == {} and cx.sizes == {} and cx.bound == {}


def _delta_case() -> tuple[Lowerer, dict]:
    n, v, e, c, d = (sp.Symbol(s, integer=True) for s in "nvecd")
    N, V, E = (sp.Symbol(s, integer=True, positive=True) for s in "NVE")
    t, a = (sp.IndexedBase(s, integer=True) for s in "ta")
    g, w, z = (sp.IndexedBase(s, real=True) for s in "gwz")
    names = {"g", "w", "z", "t", "a", "grad_out"}
    lw = Lowerer("t", names | {"N", "V", "E"}, {n: N, v: V, e: E, c: V, d: V})
    return lw, dict(n=n, v=v, e=e, c=c, d=d, N=N, t=t, a=a, g=g, w=w, z=z)


@pytest.mark.parametrize(
    ("build", "axes", "form"),
    [
        # sum_n delta(v, t[n]) g[n, e]: one index_add_ of g's rows at t
        (
            lambda s: sp.Sum(
                sp.KroneckerDelta(s["v"], s["t"][s["n"]]) * s["g"][s["n"], s["e"]],
                (s["n"], 0, s["N"] - 1),
            ),
            "ve",
            "scatter",
        ),
        # sum_e delta(v, a[n, e]) g[n, e]: a row's picks, an index reading the row n too (a
        # target axis): one scatter_add_ of g at a
        (
            lambda s: sp.Sum(
                sp.KroneckerDelta(s["v"], s["a"][s["n"], s["e"]]) * s["g"][s["n"], s["e"]],
                (s["e"], 0, sp.Symbol("E", integer=True, positive=True) - 1),
            ),
            "nv",
            "scatter",
        ),
        # a source that reads v itself reads it at t[n], where the delta is 1: still one
        # index_add_ (masks were a product over v and n too, constant_sum_from_a_fold's)
        (
            lambda s: sp.Sum(
                sp.KroneckerDelta(s["v"], s["t"][s["n"]])
                * s["g"][s["n"], s["e"]]
                * s["w"][s["v"], s["n"]],
                (s["n"], 0, s["N"] - 1),
            ),
            "ve",
            "scatter",
        ),
        # z[n, c] + g[n] delta(c, t[n]): the rest, then one in-place update
        (
            lambda s: s["z"][s["n"], s["c"]]
            + s["g"][s["n"]] * sp.KroneckerDelta(s["c"], s["t"][s["n"]]),
            "nc",
            "picks",
        ),
        # two deltas in one term: no one-hot update writes it, masks
        (
            lambda s: sp.KroneckerDelta(s["c"], s["t"][s["n"]])
            * sp.KroneckerDelta(s["d"], s["a"][s["n"]])
            * s["g"][s["n"]],
            "ncd",
            None,
        ),
    ],
)
def test_delta_form_is_decided_before_anything_is_lowered(build, axes: str, form) -> None:
    lw, s = _delta_case()
    cx = lw.context
    found = delta_form(cx, build(s), tuple(s[a] for a in axes))
    assert (found if not isinstance(found, tuple) else "picks") == form
    assert cx.statements == [] and cx.memo == {} and cx.taken == set(), "deciding lowers nothing"


@pytest.mark.parametrize("coef", [sp.sqrt(2), sp.Float(1.25)])
def test_a_coefficient_outside_a_scatter_sum_still_scatters(coef) -> None:
    """``c * sum_n delta(v, t[n]) g[n, e]`` (a scaled embedding's adjoint, ``sqrt(C) *
    E[X[n], c]``, or a fold's 1.25) is one index_add_ of ``c g``'s rows: the coefficient
    outside the sum left it to the equality masks, a (V, N) one-hot times (N, E)."""
    lw, s = _delta_case()
    summed = sp.Sum(
        sp.KroneckerDelta(s["v"], s["t"][s["n"]]) * s["g"][s["n"], s["e"]],
        (s["n"], 0, s["N"] - 1),
    )
    assign(lw.context, "dW", coef * summed, (s["v"], s["e"]), (sp.Symbol("V"), sp.Symbol("E")))
    # c g named first, the buffer made like it (batched under vmap where the rows are)
    added, statement = lw.context.statements
    assert isinstance(added.value, ir.Binary), TorchPrinter().doprint(added)
    assert isinstance(statement.value, ir.IndexAdd), TorchPrinter().doprint(statement)
    assert statement.value.target.like.name == added.targets[0]


@pytest.mark.parametrize(
    ("case", "scatter"),
    [
        ("scaled_embedding", "_index_add("),
        ("several_picks_a_row", "_scatter_add("),
        ("tied_embedding", "_index_add("),
    ],
)
def test_a_gathers_backward_is_one_scatter(case: str, scatter: str) -> None:
    """``sqrt(C) * E[X[n], c]`` (a coefficient outside the sum), ``logits[n, labels[n, o]]``
    (an index reading the row too) and a tied embedding (the scatter a term beside the
    projection's gradient) end to end: no one-hot (an arange compared with the labels) in the
    backward, one scatter."""
    import runpy
    from pathlib import Path

    path = Path(__file__).parents[1] / "cases" / f"{case}.py"
    source = module_source(runpy.run_path(str(path))["OP"], "out")
    start = source.index("\ndef backward(")
    backward = source[start : source.index("\ndef ", start + 1)]
    assert backward.count(scatter) == 1 and "torch.arange" not in backward, backward


def test_an_index_beside_a_data_read_in_a_subscript_is_an_axis() -> None:
    """``db[v + cls[h], d]`` has axes v, h and d: v only in a sum with a data read is still
    one (fuzz 1179: a contraction planned without it summed v away, then broadcast it back)."""
    v, h, d, V, H, D = sp.symbols("v h d V H D", integer=True)
    db, cls = sp.IndexedBase("db"), sp.IndexedBase("cls")
    lw = Lowerer("t", {"db", "cls", "V", "H", "D"}, {v: V, h: H, d: D}, scalars={"V", "H", "D"})
    scope = lw.context.scope([v, h, d])
    assert scope.axes(db[v + cls[h], d]) == {v, h, d}


def test_a_rule_that_loses_a_free_index_is_an_engine_bug() -> None:
    """The lowering's invariant, checked on every value: each free index of an expression is
    an axis of what it lowers to; a rule that drops one raises instead of summing silently."""
    n, N = sp.symbols("n N", integer=True)
    x = sp.IndexedBase("x")
    lossy = lambda cx, e, order: ir.Ref("x", axes=())  # noqa: E731
    cx = Context("t", {"x", "N"}, {n: N}, lossy, scalars={"N"})
    with pytest.raises(EngineBug, match=r"lost its free index \['n'\]"):
        cx.value(x[n], [n])


def test_an_aligned_node_is_dense_only_over_the_axes_it_had() -> None:
    """align labels x[a] with (a, b) but broadcasts over b (size 1): a flattened scatter index
    over (a, b) needs it expanded first (fuzz --windows 7067, 7068: T indices, T K J values)."""
    a, b, A, B = sp.symbols("a b A B", integer=True)
    x = ir.Arange(ir.Ref("A", scalar=True), ir.Ref("x"), axes=(a,))
    aligned = align(x, (a, b))
    assert aligned.axes == (a, b) and dense_axes(aligned) == {a}
    both = ir.Binary("+", aligned, ir.Ref("y", axes=(a, b)), axes=(a, b))
    assert dense_axes(both) == {a, b}


def test_an_aligned_node_aligned_again_prints_its_own_axes_and_its_nones() -> None:
    """``s[:, None]`` of an s over (a, c, d), labelled (a, b, c, d), prints 4 axes: aligned to
    (a, b, e, c, d) it is ``s[:, None][:, :, None]``. Counted as its two ``kept`` flags, it
    was taken to hold (c, d) only: the second broadcast came out ``[]`` (not Python, fuzz
    --windows 6500045 and 6500062) or added its size-1 axis at the wrong place, a shape error
    or, where sizes coincide, a silent broadcast over the wrong axes (6500171)."""
    a, b, c, d, e = sp.symbols("a b c d e", integer=True)
    once = align(ir.Ref("s", axes=(a, c, d)), (a, b, c, d))
    assert isinstance(once, ir.Broadcast) and once.kept == (True, False)
    twice = align(once, (a, b, e, c, d))
    assert isinstance(twice, ir.Broadcast) and twice.kept == (True, True, False)
    assert twice.arg == once
    assert align(once, (e, a, b, c, d)) == once  # leading axes broadcast by themselves


def test_axes_an_order_lacks_keep_the_order_they_come_in() -> None:
    """``union`` puts the axes ``order`` names first and the rest as they first come: from a
    set they came in the hash seed's order, and a fuzz op (--windows 13144) printed other
    permutes and sums under another PYTHONHASHSEED."""
    names = sp.symbols("q w e r t y", integer=True)
    x = names[2]
    assert union([names[:3], names[3:]], [x]) == (x,) + names[:2] + names[3:]
    assert union([names[::-1]], []) == names[::-1]


def test_an_affine_index_adds_its_indices_in_a_fixed_order() -> None:
    """The aranges of ``f + e + w + q`` (none in the order wanted) are added by name, not in
    the order a set of symbols iterates (which follows the hash seed)."""
    f, e, w, q = sp.symbols("f e w q", integer=True)
    F = sp.Symbol("F", integer=True, positive=True)
    lw = Lowerer("t", {"F"}, {f: F, e: F, w: F, q: F}, scalars={"F"})
    assert affine_value(lw.context, f + e + w + q, []).axes == (e, f, q, w)


def test_a_clamped_index_prints_as_clamp_unless_its_range_keeps_it_inside() -> None:
    """clamp(e, lo, hi), an index the derivation held inside a sum's range (where a where
    discards the body: fuzz --affine 1147), reads at ``e.clamp(lo, hi)``; an e that its
    indices' ranges already keep inside reads as it is. A clamp into another axis's range
    than the one it reads (y's T, clamped into u's U) is read padded, as an affine subscript
    is: clamped to T and 0 past it (fuzz --windows 12000307 read past the axis)."""
    u, U, T = sp.symbols("u U T", integer=True)
    y = sp.IndexedBase("y", shape=(T,), real=True)
    z = sp.IndexedBase("z", shape=(U,), real=True)
    lw = Lowerer("t", {"y", "z", "U", "T"}, {u: U}, scalars={"U", "T"})
    read = lw.context.value(y[clamp(u - 1, 0, T - 1)], [u])
    code = TorchPrinter().doprint(read)
    assert "clamp(0, T - 1)" in code and "torch.where" not in code, code
    inside = lw.context.value(z[clamp(u, 0, U - 1)], [u])
    assert "clamp" not in TorchPrinter().doprint(inside)
    other = TorchPrinter().doprint(lw.context.value(y[clamp(u, 0, U - 1)], [u]))
    assert "torch.where" in other and "clamp(0, T - 1)" in other, other


def test_an_int_tensor_is_cast_before_it_meets_a_python_float() -> None:
    """A clamped index is an int64 tensor; where its value is computed with (divided by 3, an
    exp's argument, a where's branch beside 0.5), it is cast to the op's dtype first: torch
    would compute ``int64 / 3`` in float32 inside a float64 backward (1e-8 off). Where the
    result is whole (``clamp + 1``, a subscript) it stays int."""
    u, U, T = sp.symbols("u U T", integer=True)
    y = sp.IndexedBase("y", shape=(T,), real=True)
    lw = Lowerer("t", {"y", "U", "T"}, {u: U}, scalars={"U", "T"})
    at = clamp(u - 1, 0, T - 1)
    printed = lambda e: TorchPrinter().doprint(lw.context.value(e, [u]))  # noqa: E731
    for e in (sp.exp(at / 3) * y[u], at * sp.Float(0.5) + y[u], where(u > 2, at, sp.Float(0.5))):
        code = printed(e)
        assert ".clamp(0, T - 1).to(grad_out.dtype)" in code, code
    assert ".to(" not in printed(at + 1) and ".to(" not in printed(y[at + 1])


@pytest.mark.parametrize(
    "definition",
    [
        "out[r] = Sum(W[r - 3*t]*exp(r/3), t)",
        "out[r] = Sum(W[r - 3*t]*sin(0.5*r), t)",
        "out[r] = Sum(W[r - 3*t]*log(r + 1.5), t)",
        "out[r] = Sum(W[r - 3*t]*sigmoid(r/7), t)",
    ],
)
def test_a_function_of_a_solved_position_is_computed_in_the_ops_dtype(definition: str) -> None:
    """dW[i] sums over t with r = i + 3 t solved by a delta and clamped into r's range: the
    fuzzer's oracle (the definition evaluated by torch's autograd) agrees to float64 (each
    of these was 2e-9 to 2e-8 off while the clamp's int64 met the python number)."""
    from fuzz.check import run_case

    op = Op(
        name="t", doc="t", inputs=["W[I]"], definitions=[definition], ranges={"r": "I", "t": "I"}
    )
    outcome = run_case(op, 1)
    assert outcome.status == "passed", outcome.detail


def test_a_where_whose_branches_lower_to_one_number_is_that_number() -> None:
    """where(c, 0, f) with f a product of masks 0 in every case: f lowers to 0, and so does the
    where, without the condition's axes (fuzz 700637: the indicator kept x's axis n and lost m)."""
    n, m, N, M = sp.symbols("n m N M", integer=True)
    x, y, g = sp.IndexedBase("x"), sp.IndexedBase("y"), sp.IndexedBase("g")
    lw = Lowerer("t", {"x", "y", "g", "N", "M"}, {n: N, m: M}, scalars={"N", "M"})
    c = y[m] >= 0
    masks = sp.Mul(where(c, 0, 1), where(c, 1, 0), g[n, m], evaluate=False)
    assert lw.context.value(where(x[n] >= 0, 0, masks), [n, m]) == ir.Number(0)


def test_a_where_of_numbers_with_an_infinite_branch_selects_and_never_multiplies() -> None:
    """where(b <= 0, inf, 0) as a mask times (inf - 0) plus 0 is 0 * inf = nan wherever the
    condition fails (fuzz 740143: a forward silently all NaN); torch.where selects instead,
    in the op's dtype."""
    lines = _lines(["x[N]", "b"], ["y[n] = where(b <= 0, inf, 0) + x[n]"])
    want = 'torch.where(b <= 0, torch.tensor(float("inf"), dtype=x.dtype, device=x.device), 0)'
    assert any(want in line for line in lines), "\n".join(lines)


def _compiled(op: Op) -> tuple[str, str, dict]:
    """``op``'s module: its forward's text, the whole source, and the namespace it ran in."""
    namespace: dict = {}
    source = module_source(op, "out")
    exec(compile(source, "t", "exec"), namespace)
    start = source.index("\ndef forward(")
    return source[start : source.index("\ndef ", start + 1)], source, namespace


def test_a_product_made_anyway_is_not_made_again_in_an_addmm() -> None:
    lines = _lines(
        ["x[N, D]", "W1[D, F]", "W3[D, F]", "W2[F, M]"],
        [
            "a[n, f] = Sum(x[n, d] * W1[d, f], d)",
            "bb[n, f] = Sum(x[n, d] * W3[d, f], d)",
            "h[n, f] = a[n, f] * sigmoid(a[n, f]) * bb[n, f]",
            "out[n, m] = Sum(h[n, f] * W2[f, m], f)",
        ],
    )
    backward = lines[
        lines.index("def backward(grad_out, saved, needs=(True, True, True, True)):") :
    ]
    assert sum("grad_out @ W2.T" in line or "grad_out, W2.T" in line for line in backward) == 1


def test_adjoints_two_inputs_read_or_edges_gather_are_kept() -> None:
    # a GAT layer: the projection's adjoint dh once, x's and W's each one matmul of it (both
    # inlined, W was contracted with the edges' gathered reads at E: 2.2x autograd's time);
    # the denominator's dden once per node, gathered by the edges (inlined, a (V, D, K)
    # scatter was gathered back to (E, D, K) and summed over D at each edge)
    text = module_source(runpy.run_path("tests/cases/gat_layer.py")["OP"], "out")
    backward = text[text.index("def backward") : text.index("def _double_forward")]
    lines = [line.strip() for line in backward.splitlines()]
    assert "dx = dh.flatten(1) @ W.permute(1, 2, 0).flatten(0, 1)" in lines
    assert "dW = (x.T @ dh.flatten(1)).unflatten(1, (dh.shape[1], dh.shape[2]))" in lines
    assert "dden = (grad_out * sum_den_dst_ex_h_src).sum(2)" in lines
    assert sum("_index_select(dden, dst)" in line for line in lines) == 1
    # er's and el's adjoints scatter one edge tensor to the edges' two ends: made once (the
    # second was made again before its first was freed, a temporary not yet freed)
    (der,) = [line for line in lines if line.startswith("der = _index_add(")]
    (del_,) = [line for line in lines if line.startswith("del_ = _index_add(")]
    assert der.split(", ")[-1] == del_.split(", ")[-1]


def test_an_equality_of_two_data_is_a_scatter_read_at_the_data() -> None:
    # a ReLU on a scattered sum read at the source nodes: dst[e'] == src[e] summed over e'
    # is the sum scattered over the nodes once and its rows gathered at src (an (E, E) mask
    # and an (E, D, E) product before; found probing)
    text = module_source(
        Op(
            "t",
            ["x[V, D]", "src[E]: int64", "dst[E]: int64"],
            [
                "h[i, d] = relu(x[i, d] + Sum(where(dst[e] == i, x[src[e], d], 0), e))",
                "out[e, d] = h[src[e], d]",
            ],
            ranges={"i": "V"},
        ),
        "out",
    )
    backward = text[text.index("def backward") : text.index("def _double_forward")]
    assert not any(
        f in backward for f in ("dst == src", "dst[:, None] == src", "src[:, None] == dst")
    )
    # the relu's mask on dh, kept (derive/symbolic/cuts.py), gathered at the data once
    assert "_index_select(torch.nn.functional.pad(at_dh_dst_src_x, (0, 0, 0, 1)), dst_or_V)" in (
        backward
    )


def test_a_gate_of_indices_alone_is_a_matrix_contracted() -> None:
    # a discounted sum: the gate and the power read indices alone, a (T, T) matrix
    # contracted with r (a (N, T, T) product under the gate before; found probing: 39x
    # autograd's time, 341x its memory)
    lines = _lines(
        ["r[N, T]", "gamma"],
        ["out[n, t] = Sum(where(s >= t, gamma**(s - t) * r[n, s], 0), s)"],
        ranges={"t": "T"},
    )
    assert "out = r @ t_indices" in lines


def test_a_sum_over_a_wide_sum_of_products_is_split_into_contractions() -> None:
    # x[j, k] (A[i, j] + B[j, l] C[k, l]) is over four indices, each tensor over two: summed
    # whole it is an I x J x K x L temporary; split, two einsums (attention's second order)
    import torch

    op = Op(
        "t",
        ["x[J, K]", "A[I, J]", "B[J, L]", "C[K, L]"],
        ["out[i] = Sum(x[j, k] * (A[i, j] + B[j, l] * C[k, l]), j, k, l)"],
    )
    forward, source, namespace = _compiled(op)
    assert forward.count("torch.einsum(") == 2 and ".sum(" not in forward
    g = torch.Generator().manual_seed(0)
    x, A, B, C = (
        torch.randn(*s, generator=g, dtype=torch.float64) for s in [(3, 4), (2, 3), (3, 5), (4, 5)]
    )
    want = (x[None, :, :, None] * (A[:, :, None, None] + B[None, :, None, :] * C[None, None])).sum(
        (1, 2, 3)
    )
    out, _ = namespace["forward"](x, A, B, C)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)


def test_a_sum_inside_a_nested_sum_is_an_operand_of_one_contraction() -> None:
    # sum_{b,c} g[b, c] sum_d W[e, d] S[b, c, d] with S a sum itself: g with S first, over b
    # and c (assign.summed_where_met moves that sum inside, where it meets S alone), then W:
    # never the E x B x C temporary sum_d W S
    import torch

    op = Op(
        "t",
        ["g[B, C]", "W[E, D]", "P[B, C, D, T]"],
        ["out[e] = Sum(g[b, c] * Sum(W[e, d] * Sum(P[b, c, d, t] * P[b, c, d, t], t), d), b, c)"],
    )
    _, source, namespace = _compiled(op)
    assert "out = W @ (g.flatten(0) @ sum_P.flatten(0, 1))" in source
    g = torch.Generator().manual_seed(0)
    shapes = [(2, 3), (4, 5), (2, 3, 5, 6)]
    gg, W, P = (torch.randn(*s, generator=g, dtype=torch.float64) for s in shapes)
    out, _ = namespace["forward"](gg, W, P)
    torch.testing.assert_close(out, torch.einsum("bc,ed,bcdt->e", gg, W, P * P))


def test_a_mask_beside_tensors_is_applied_to_one_and_then_contracted() -> None:
    # sum_t1 where(t2 <= t1, 1, 0) s[t1, t2] q[t1, d]: the mask (indices alone) goes onto s,
    # the narrowest tensor over its axes, and the product is one matmul with q; before, the
    # three were a T x T x D broadcast product summed (attention's second order, dk)
    import torch

    op = Op(
        "t",
        ["s[T, T]", "q[T, D]"],
        ["out[t2, d] = Sum(where(t2 <= t1, 1, 0) * s[t1, t2] * q[t1, d], t1)"],
    )
    forward, _, namespace = _compiled(op)
    assert " @ q" in forward and ".sum(" not in forward, forward
    g = torch.Generator().manual_seed(0)
    s, q = (torch.randn(*n, generator=g, dtype=torch.float64) for n in [(5, 5), (5, 3)])
    out, _ = namespace["forward"](s, q)
    torch.testing.assert_close(out, (s * torch.ones(5, 5).tril().double()).T @ q)


@pytest.mark.parametrize(
    ("inputs", "definition"),
    [
        (["x[A, T]"], "out[a, t] = where(a*t > 3, x[a, t], 0)"),
        (["x[A, T]"], "out[a, t] = where((a - t)**2 <= 2, x[a, t], 0)"),
        # fuzz --windows 15992: a maximum's adjoint compares logits with 2.25 (a - t)**2
        (["logits[B, B, B]"], "act[a, t, x] = maximum(logits[a, x, t], (1.5*(a - t))**2)"),
    ],
)
def test_a_product_of_indices_in_a_comparison_broadcasts_over_both(inputs, definition) -> None:
    """An index expression with a product of two indices is no affine one: taken as t's
    coefficient times a's arange, t's arange was laid along a's axis (a crash where the sizes
    differ, a wrong comparison where they agree)."""
    from fuzz.check import run_case

    op = Op("index_product", inputs, [definition])
    outcome = run_case(op, 1)
    assert outcome.status == "passed", outcome.line()


APART = [
    (
        ["z[R, R, R]", "b2[R, R, V]", "idx[R]: int64"],
        "emb[f, kk] = b2[kk, f, f - 1] * z[kk, idx[f + 4], f - 1]",
    ),
    (
        ["z[R, R]", "b2[R, V]", "w[R, M]"],
        "out[f, m] = Sum(b2[kk, f - 1] * z[kk, f - 1] * w[kk, m], kk)",
    ),
    (["z[R, R]", "b2[R, V]"], "out[kk] = Sum(b2[kk, f - 1] * z[kk, f - 1], f)"),
    (["z[R, R]", "b2[V, R]"], "out[m] = Sum(b2[f - 1, kk] * z[f - 1, m], f, kk)"),
]


@pytest.mark.parametrize("V", [1, 3, 6])
@pytest.mark.parametrize(("inputs", "definition"), APART)
def test_an_index_read_on_an_axis_of_another_size_is_zero_past_it(inputs, definition, V) -> None:
    """An index whose range is one axis's, read on another tensor's axis of another size:
    the first case's dz reads b2[r, r2 + 1, r2] with r2 over z's R on b2's V (fuzz --windows
    16715). Read as b2's own axis it was a shape mismatch and, where V is 1, broadcast
    silently (dz 2.2 off); the last case's second order shared one sum over R and over V
    (lower.memo._pins). First and second order through the fuzzer's checks at its sizes, and
    the backward against autograd through the definition's text at V below, at and above R."""
    import torch

    from derive.verify.oracle import oracle_output
    from fuzz.check import run_case

    op = Op("apart", inputs, [definition], ranges={"f": "R"})
    if V == 3:
        outcome = run_case(op, 1)
        assert outcome.status == "passed", outcome.line()
    _, _, namespace = _compiled(op)
    g = torch.Generator().manual_seed(0)
    sizes = {"R": 3 if V == 3 else 4, "V": V, "M": 2}
    named = {}
    for spec in inputs:
        name, dims = spec.split("[")[0], spec.split("[")[1].split("]")[0].split(", ")
        shape = [sizes[d] for d in dims]
        if spec.endswith("int64"):
            named[name] = torch.randint(0, sizes["R"], shape, generator=g)
        else:
            named[name] = torch.randn(*shape, dtype=torch.float64, generator=g, requires_grad=True)
    want = oracle_output(op, named)
    floats = [t for t in named.values() if t.is_floating_point()]
    grad_out = torch.randn(want.shape, dtype=torch.float64, generator=g)
    grads = torch.autograd.grad(want, floats, grad_out)
    out, saved = namespace["forward"](*[t.detach() for t in named.values()])
    got = [d for d in namespace["backward"](grad_out, saved) if d is not None]
    torch.testing.assert_close(out, want.detach(), rtol=0, atol=1e-12)
    for d, w in zip(got, grads, strict=True):
        torch.testing.assert_close(d, w, rtol=0, atol=1e-12)


def test_an_exp_over_a_sum_that_holds_it_is_taken_out_as_their_ratio() -> None:
    """``exp(a + y[k]) / S**2``, S = Sum(exp(y[w]), w): exp(y[k]) / S (at most 1) is one
    factor, exp(a) and the other 1 / S the rest, unevaluated so SymPy does not merge the exps
    again; inside a sum over another index too. An exp whose terms are no term of a divisor's
    sum is left as it is."""
    from types import SimpleNamespace

    from derive.lower.arithmetic import at_most_one, exps_over_their_sums

    a, k, w, c = sp.symbols("a k w c", integer=True)
    y, z, g = sp.IndexedBase("y"), sp.IndexedBase("z"), sp.IndexedBase("g")
    S = sp.Sum(sp.exp(y[w]), (w, 0, 4))
    ratio = sp.Mul(sp.exp(y[k]), sp.Pow(S, -1), evaluate=False)
    split = exps_over_their_sums(sp.exp(a + y[k]) / S**2)
    assert set(split.args) == {ratio, sp.exp(a), 1 / S}
    assert at_most_one(SimpleNamespace(shifted=set(), maxima=set()), ratio)
    inner = sp.Sum(g[c] * sp.exp(z[c] + y[k]), (c, 0, 2))
    assert set(exps_over_their_sums(inner / S).args) == {
        ratio,
        sp.Sum(g[c] * sp.exp(z[c]), (c, 0, 2)),
    }
    assert exps_over_their_sums(sp.exp(a + z[k]) / S**2) == sp.exp(a + z[k]) / S**2
    bound = sp.Sum(g[c] * sp.exp(z[c] + y[c]), (c, 0, 2)) / S  # y[c] reads the sum's index
    assert exps_over_their_sums(bound) == bound


def test_a_pick_update_is_one_index_put_through_its_helper() -> None:
    """``dy[z, X[j, k], t, l] -= v`` where no scatter fits: one ``index_put_(accumulate=True)``
    through ``_index_put`` (in place only on a plain tensor: a Tensor subclass such as DTensor
    relabels an in-place update's target without moving its data), not an indexed ``-=``,
    which indexes, subtracts and writes back, in place whatever the tensor."""
    import runpy
    from pathlib import Path

    path = Path(__file__).parents[1] / "cases" / "exp_over_two_exp_sums.py"
    source = module_source(runpy.run_path(str(path))["OP"], "out")
    assert "    dy = _index_put(\n        dy,\n" in source
    assert "] -= " not in source and "] += " not in source


def test_a_decimal_literal_is_exact_where_its_exp_would_leave_floats() -> None:
    """An integer or a decimal of magnitude 64 or more is the exact number it writes (SymPy
    takes a Float term out of an exp as a factor: exp(x + 1000.5) = 3.2e434 exp(x)); a small
    fraction stays a Float, whose denominator SymPy would otherwise clear into the code."""
    from derive.language.parse import exact_decimal

    assert exact_decimal("-10000.0") == -10000 and exact_decimal("-10000.0").is_Integer
    assert exact_decimal("1000.5") == sp.Rational(2001, 2)
    assert exact_decimal("1e30") == 10**30
    assert exact_decimal("0.044715").is_Float and exact_decimal("63.5").is_Float


def test_a_mask_scaled_past_a_number_is_added_before_what_it_masks() -> None:
    # x + (1 - keep) * -1e30 is x - 1e30 + 1e30 keep in SymPy: added in that order x is lost
    # in 1e30's rounding where keep = 1; the number and its like-sized terms go first. An
    # integer past int64 prints as a float (torch refuses the int)
    lines = _lines(["x[N]", "keep[N]"], ["out[n] = x[n] + (1 - keep[n]) * -1e30"])
    assert "out = -(1 - keep) * 1e30 + x" in lines  # the written 1 - keep, scaled once


def test_a_sum_the_text_groups_is_added_first() -> None:
    # SymPy flattens (y - x) into the sum around it; torch adds it first, and so does the code:
    # expm1(d) - d was (expm1(d) + x) - y, 0 where it is 5e-19; a scaled group, 2 (a - b),
    # is 2 a - 2 b to SymPy and still one sum
    from derive.language import parse

    op = Op("t", ["x[N]", "y[N]"], ["out[n] = expm1(y[n] - x[n]) - (y[n] - x[n]) + 3"])
    sums = {str(s) for s in parse(op).sums}
    assert "-x[n] + y[n]" in sums and "-x[n] + y[n] - expm1(-x[n] + y[n])" not in sums
    lines = _lines(["x[N]", "y[N]"], ["out[n] = expm1(y[n] - x[n]) - (y[n] - x[n]) + 3"])
    # y - x computed once, for the expm1 (lifted and saved) and as the group: -(y - x) + ..
    assert "shared_x_y = y - x" in lines and "out = -shared_x_y + out_expm10 + 3" in lines
    lines = _lines(["a[N]", "b[N]", "c[N]"], ["out[n] = c[n] + 2 * (a[n] - b[n])"])
    assert "out = (a - b) * 2 + c" in lines  # the parts first, scaled once


def test_a_max_shift_is_added_before_the_rest_of_a_sum() -> None:
    # x - m - log(S) with m = Max(x): x - m is exact near the maximum, x - log(S) rounds at
    # x's magnitude (a log-softmax 1e-6 off at logits of 1e10)
    lp = "lp[n, c] = x[n, c] - m[n] - log(Sum(exp(x[n, c2] - m[n]), c2))"
    lines = _lines(["x[N, C]"], ["m[n] = Max(x[n, c], c)", lp])
    assert any(line.startswith("lp = shared_m_x - torch.log(") for line in lines), lines


def test_a_form_that_negates_its_argument_reads_it_negated() -> None:
    # softplus(u) is -logsigmoid(-u): softplus(-x) reads x, softplus(x - y) reads y - x
    lines = _lines(["x[N]", "y[N]"], ["out[n] = softplus(-x[n]) + softplus(x[n] - y[n])"])
    text = "\n".join(lines)
    assert "logsigmoid(x)" in text and "logsigmoid(y - x)" in text and "-(-" not in text


@pytest.mark.parametrize("terms", [3, 64, 200_000])
def test_a_numeric_sum_is_printed_as_its_number(terms: int, tmp_path) -> None:
    # fuzz 1501090: a count over literal axes reached the printer as a Sum; evaluated exactly,
    # the 64 rationals of a harmonic sum printed an int past int64 beside a tensor, and
    # 200,000 of them took SymPy minutes (found by probing)
    import torch

    from tests.modules.emitted import imported

    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "harmonic.py").write_text(
        'from derive import Op\n\nOP = Op(name="harmonic", '
        f'inputs=["x[A, {terms}]"], '
        'definitions=["h[a] = Sum((x[a, k] - x[a, 0]) / (k + 1), k)"])\n'
    )
    module, _ = imported(tmp_path / "ops" / "harmonic.py", tmp_path)
    x = torch.randn(2, terms, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(module.Function.apply(x).sum(), x)
    want = 1 / torch.arange(1, terms + 1, dtype=torch.float64).expand(2, terms).clone()
    want[:, 0] -= want[0].sum()
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)
    assert ir.Number(sp.Sum(1, (sp.Symbol("n"), 0, 2), (sp.Symbol("m"), 0, 2))).value == 9


def test_a_body_is_laid_out_in_the_order_every_read_stores_its_axes() -> None:
    """``(x[n, k] - mu[m, k])**2``: k is the last axis of both reads, so it goes last and m,
    which mu stores before k, before it: (n, m, k). From the widest read alone it was (n, k,
    m), mu read transposed in the broadcast's inner loop."""
    n, m, k = sp.symbols("n m k", integer=True)
    N, M, K = sp.symbols("N M K", integer=True, positive=True)
    x = sp.IndexedBase("x", shape=(N, K))
    mu = sp.IndexedBase("mu", shape=(M, K))
    assert natural_order((x[n, k] - mu[m, k]) ** 2, [n, m]) == [n, m, k]
    assert natural_order(x[n, k] * mu[m, k], [m]) == [n, m, k]
