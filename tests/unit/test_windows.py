"""The window rules of derive/lower/windows.py (issue 25), one expression each: what a rule
matches (pure: it lowers nothing), what it refuses (the generic lowering stays), and the torch
kernel an op's module then holds. The numbers are tests/modules/test_windows.py's and
tests/modules/test_convolutions.py's."""

from __future__ import annotations

import pytest
import sympy as sp

from derive import Op
from derive.emit.generate import module_source
from derive.functions import where
from derive.lower.lowerer import Lowerer
from derive.lower.windows import WINDOWS, plan_window

N, C, M, T, K, L = sp.symbols("N C M T K L", integer=True, positive=True)
S, P = sp.symbols("S P", real=True)  # int params are real symbols
n, c, o, t, k, j = sp.symbols("n c o t k j", integer=True)
x = sp.IndexedBase("x", shape=(N, C, T), real=True)
w = sp.IndexedBase("w", shape=(M, C, K), real=True)
g = sp.IndexedBase("g", shape=(N, M, L), real=True)


def _scope(order: list):
    names = {"x", "w", "g", "N", "C", "M", "T", "K", "L", "S", "P"}
    lw = Lowerer("t", names, {t: L}, scalars={"N", "C", "M", "T", "K", "L", "S", "P"})
    return lw.context, lw.context.scope(order)


def _sum(body, *indices):
    ranges = {n: N, c: C, o: M, k: K, j: L, t: T}
    return sp.Sum(body, *[(i, 0, ranges[i] - 1) for i in indices])


@pytest.mark.parametrize(
    ("expr", "form", "flip"),
    [
        # the forward: x read at S*t + k - P, the kernel w
        (_sum(x[n, c, S * t + k - P] * w[o, c, k], c, k), "conv", False),
        # x's adjoint, solved by the inversion (stride 1): grad_out read backwards, w flipped
        (_sum(g[n, o, t - 2 * k + P] * w[o, c, k], o, k), "conv", True),
        # w's adjoint: x correlated with grad_out (the window is grad_out's axis); k's range
        # unknown here, so not the weight gradient (see below)
        (_sum(g[n, o, j] * x[n, c, 2 * k + S * j - P], n, j), "conv", False),
        # x's adjoint with the delta kept (stride and dilation params): a conv_transpose
        (
            _sum(g[n, o, j] * _sum(sp.KroneckerDelta(t, 2 * k - P + S * j) * w[o, c, k], k), o, j),
            "transposed",
            False,
        ),
        # x's adjoint solved, stride 2: the kernel read along t, backwards along grad_out's j
        (_sum(g[n, o, j] * w[o, c, t - 2 * j], o, j), "transposed", False),
        # the double backward's adjoint of grad_out: x read plainly, the kernel at t - j; as a
        # conv_transpose the kernel is flipped (a copy), as a correlation of x it is not
        (_sum(x[n, c, t] * w[o, c, t - j], c, t), "conv", False),
        # the same at stride 2 (the kernel read at t - 2*j): a correlation only (fuzz --windows
        # 15148's index grid over (T, J, K)); backwards, flipped
        (_sum(x[n, c, t] * w[o, c, t - 2 * j], c, t), "conv", False),
        (_sum(x[n, c, t] * w[o, c, 2 * j - t + 1], c, t), "conv", True),
        # refused: a window summed over part of its axis only
        (sp.Sum(x[n, c, t + k] * w[o, c, k], (c, 0, C - 1), (k, 0, K - 2)), None, False),
        # refused: an index of one tensor alone summed
        (_sum(x[n, c, t + k] * w[o, c, k], n, c, k), None, False),
        # refused: a coefficient of unknown sign on the window
        (_sum(x[n, c, t + (S - 2) * k] * w[o, c, k], c, k), None, False),
        # refused: a plain contraction is the matmul's, not a window
        (_sum(x[n, c, t] * w[o, c, t], c), None, False),
    ],
)
def test_window_match_is_pure(expr: sp.Sum, form: str | None, flip: bool) -> None:
    cx, scope = _scope([n, o, c, t, k, j])
    plan = plan_window(scope, expr)
    assert (plan is None) == (form is None)
    if plan is not None:
        assert plan.form == form and any(s.flip for s in plan.spatial) == flip
    assert cx.statements == [] and cx.memo == {}


def _where(e):
    return where(e, 1, 0)


@pytest.mark.parametrize(
    ("expr", "form"),
    [
        # a window Sum's adjoint: each t gets the g[j] whose windows (K long from S*j - P) hold it
        (
            _sum(g[n, o, j] * _where(t - S * j + P >= 0) * _where(t - S * j + P <= K - 1), j),
            "transposed",
        ),
        # the same written the other way round (t with coefficient -1 in both halves)
        (
            _sum(g[n, o, j] * _where(S * j - t - P <= 0) * _where(S * j - t - P >= 1 - K), j),
            "transposed",
        ),
        # the window of x at j, K long from S*j - P: a correlation with ones
        (_sum(x[n, c, t] * _where(t - S * j + P >= 0) * _where(t - S * j + P < K), t), "conv"),
        # a window Sum of one read (a pool's): the same correlation with ones, no indicator
        (_sum(x[n, c, S * t + k - P], k), "conv"),
        # refused: a window Sum over a plain index too (channels summed: no kernel of ones)
        (_sum(x[n, c, S * t + k - P], c, k), None),
        # refused: one half only (a running sum, the scans' shape)
        (_sum(g[n, o, j] * _where(t - S * j >= 0), j), None),
        # refused: halves that do not close a window of fixed length (K - 1 + j - j... t)
        (_sum(g[n, o, j] * _where(t - S * j >= 0) * _where(t - j <= K - 1), j), None),
        # refused: a second tensor (a convolution's, not a window of ones)
        (
            _sum(
                g[n, o, j] * w[o, c, k] * _where(t - S * j >= 0) * _where(t - S * j <= K - 1), j, k
            ),
            None,
        ),
    ],
)
def test_a_window_indicator_is_a_kernel_of_ones(expr: sp.Sum, form: str | None) -> None:
    cx, _ = _scope([])
    cx.learn([(k, K)])  # the window's range, as the Sum's lowering learns it first
    scope = cx.scope([n, o, c, t, k, j])
    plan = plan_window(scope, expr)
    assert (plan is None) == (form is None)
    if plan is not None:
        assert plan.form == form and plan.ones and plan.batch == ()
        assert plan.groups == (n, o if form != "conv" else c)
        assert [s.stride for s in plan.spatial] == [S] and plan.w.base.shape == (K,)
    assert cx.statements == [] and cx.memo == {}


def test_an_average_pools_adjoint_is_one_conv_transpose_with_ones() -> None:
    """Sum over x[n, c, S*i + p - P, S*j + q - P] / K^2: the forward is one conv2d of x with a
    K x K kernel of ones; its adjoint, grad_out spread back over each window (two indicators
    per axis after the inversion), one conv_transpose2d of grad_out with the same ones, batch
    and channels as its groups: no H x HO mask; the double backward's adjoint of grad_y is one
    conv2d."""
    op = Op(
        "t",
        ["x[N, C, H, W]"],
        ["out[n, c, i, j] = Sum(x[n, c, S*i + p - P, S*j + q - P], p, q) / (K*K)"],
        params={"kernel": 2, "S": 2, "P": 1},
        sizes={
            "K": "kernel",
            "HO": "(H + 2*P - kernel) // S + 1",
            "WO": "(W + 2*P - kernel) // S + 1",
        },
        ranges={"p": "K", "q": "K", "i": "HO", "j": "WO"},
    )
    text = "\n".join(_lines(op))
    forward = text[text.index("def forward") : text.index("def backward")]
    backward = text[text.index("def backward") : text.index("def _double_forward")]
    ones = "torch.full((max(C * N, 1), 1, K, K), 1,"  # depthwise; N*C = 0 gives (0, 1, ..)
    assert "torch.conv2d(" in forward and ones in forward and ".unfold(" not in forward
    assert "torch.conv_transpose2d(" in backward and ones in backward
    assert "torch.arange" not in backward and "torch.where" not in backward
    double = text[text.index("def _double_backward(") : text.index("def _jvp(")]
    assert "torch.conv2d(" in double and "torch.arange" not in double


def test_every_window_rule_has_its_identity() -> None:
    assert [name for name, _, _ in WINDOWS] == [
        "correlation",
        "weight gradient",
        "transposed read",
        "correlated read",
        "transposed",
        "window sum",
        "window indicator",
    ]
    assert all("->" in identity for _, _, identity in WINDOWS)


def _weight_scope(derived: dict):
    names = {"x", "w", "g", "N", "C", "M", "T", "K", "L", "S", "P"}
    scalars = {"N", "C", "M", "T", "K", "L", "S", "P"}
    lw = Lowerer("t", names, {k: K}, scalars=scalars, derived=derived)
    return lw.context.scope([o, c, k, n, j])


def test_a_correlation_over_the_batch_is_a_weight_gradient_where_the_sizes_agree() -> None:
    """w's adjoint, sum_{n,j} x[n, c, 2*k + S*j - P] g[n, o, j]: as a conv it transposes x and
    g (batch and channels swapped) and its result; as conv_weight it reads both in place, but
    that kernel checks L against the convolution's output size, so only where L is shown to be
    (T + 2*P - 2*(K - 1) - 1) // S + 1."""
    expr = _sum(g[n, o, j] * x[n, c, 2 * k + S * j - P], n, j)
    consistent = {L: sp.floor((T + 2 * P - 2 * (K - 1) - 1) / S) + 1}
    plan = plan_window(_weight_scope(consistent), expr)
    assert plan.form == "weight" and plan.batch == (c,) and plan.channels == (n,)
    assert plan_window(_weight_scope({L: T - K + 1}), expr).form == "conv"  # not shown: a conv
    assert plan_window(_weight_scope({}), expr).form == "conv"


def _lines(op: Op) -> list[str]:
    return [line.strip() for line in module_source(op, "out").splitlines()]


def test_a_valid_convolution_is_one_conv1d() -> None:
    op = Op(
        "t",
        ["x[N, C, T]", "w[O, C, K]"],
        ["out[n, o, t] = Sum(x[n, c, t + k] * w[o, c, k], c, k)"],
        sizes={"L": "T - K + 1"},
        ranges={"t": "L"},
    )
    lines = _lines(op)
    assert "out = torch.conv1d(x, w)" in lines
    assert not any("torch.where" in line for line in lines)


def test_a_bias_and_the_padding_ride_in_the_convolution() -> None:
    """b[o] beside the window sum is conv's bias=; the zero padding P is torch's padding=,
    the read never running past it (L's definition shows it); the adjoints read grad_out and
    x in place: a conv_transpose and a weight gradient, no pad, crop, flip or permute."""
    op = Op(
        "t",
        ["x[N, C, T]", "w[O, C, K]", "b[O]"],
        ["out[n, o, t] = Sum(x[n, c, S*t + k - P] * w[o, c, k], c, k) + b[o]"],
        params={"S": 2, "P": 1},
        sizes={"L": "(T + 2*P - K) // S + 1"},
        ranges={"t": "L"},
    )
    text = "\n".join(_lines(op))
    text = text[text.index("def forward") : text.index("def _double_forward")]  # fwd and bwd
    assert "out = torch.conv1d(x, w, b, stride=S, padding=P)" in text
    assert "torch.conv_transpose1d(" in text and "torch.nn.grad.conv1d_weight(" in text
    for copy in ("pad(", "narrow(", "flip(", "permute(", "torch.where"):
        assert copy not in text


def test_a_grouped_two_dimensional_window_is_one_grouped_conv2d() -> None:
    """Forward and backward; the double backward's 2-d deltas split into one sum per axis
    (an equality mask each) are no window the rules know: the generic lowering stays."""
    op = Op(
        "t",
        ["x[N, G, C, H, W]", "w[G, O, C, KH, KW]"],
        [
            "out[n, g, o, i, j] = Sum(x[n, g, c, 2*i + p - 1, 2*j + q - 1] * w[g, o, c, p, q],"
            " c, p, q)"
        ],
        sizes={"HO": "(H + 2 - KH) // 2 + 1", "WO": "(W + 2 - KW) // 2 + 1"},
        ranges={"i": "HO", "j": "WO"},
    )
    text = "\n".join(_lines(op))
    text = text[text.index("def forward") : text.index("def _double_forward")]  # fwd and bwd
    assert "groups=G" in text and "torch.conv2d(" in text and "torch.where" not in text


def test_a_max_pool_reads_its_windows_in_place_and_scatters_its_adjoint() -> None:
    """Max over x[n, c, S*i + p, S*j + q]: one torch max pool, its argmax torch's index less
    the window's origin (a = p*W + q); the adjoint, routed to the argmax by two deltas against
    its digits (h = S*i + floor(a/W), w = S*j + Mod(a, W)), is one scatter_add_ into zeros at
    the folded index S*i*W + S*j + a: no division, never an H x HO equality mask."""
    op = Op(
        "t",
        ["x[N, C, H, W]"],
        ["out[n, c, i, j] = Max(x[n, c, S*i + p, S*j + q], p, q)"],
        params={"kernel": 2, "S": 2},
        sizes={"K": "kernel", "HO": "(H - kernel) // S + 1", "WO": "(W - kernel) // S + 1"},
        ranges={"p": "K", "q": "K", "i": "HO", "j": "WO"},
    )
    text = "\n".join(_lines(op))
    forward = text[text.index("def forward") : text.index("def backward")]
    backward = text[text.index("def backward") : text.index("def _double_forward")]
    assert "torch.nn.functional.max_pool2d(" in forward and "return_indices=True" in forward
    assert ".unfold(" not in forward and "torch.where" not in forward
    assert "dx = _scatter_add(" in backward and "torch.arange(H," not in backward
    assert " // " not in backward and " % " not in backward and "gather" not in backward


def test_a_max_pools_argmax_is_proven_inside_x_so_its_scatter_has_no_clamp_or_mask() -> None:
    """h = S*i + argmax with argmax in 0..K-1 and i in 0..HO-1, HO = (H - K) // S + 1:
    S*(HO - 1) + K - 1 <= H - 1 is shown on the sizes (derive.lower.bounds), so the scatter's
    index is neither clamped nor its value masked, and the window's own bounds
    (0 <= h - S*i <= K - 1) are no masks either; with zero padding (a read at S*i + p - P) a
    position may fall outside x, and the clamp and mask stay."""
    sizes = {"K": "kernel", "HO": "(H - kernel) // S + 1", "WO": "(W - kernel) // S + 1"}
    ranges = {"p": "K", "q": "K", "i": "HO", "j": "WO"}
    valid = Op(
        "t",
        ["x[N, C, H, W]"],
        ["out[n, c, i, j] = Max(x[n, c, S*i + p, S*j + q], p, q)"],
        params={"kernel": 2, "S": 2},
        sizes=sizes,
        ranges=ranges,
    )
    text = "\n".join(_lines(valid))
    backward = text[text.index("def backward") : text.index("def _double_forward")]
    assert "dx = _scatter_add(" in backward
    assert "clamp" not in backward and "torch.where" not in backward and ">= 0" not in backward
    padded = Op(
        "t",
        ["x[N, C, H, W]"],
        ["out[n, c, i, j] = Max(x[n, c, S*i + p - P, S*j + q - P], p, q)"],
        params={"kernel": 2, "S": 2, "P": 1},
        sizes={"K": "kernel", "HO": "(H + 2*P - kernel) // S + 1", "WO": "(W - kernel) // S + 1"},
        ranges=ranges,
    )
    text = "\n".join(_lines(padded))
    backward = text[text.index("def backward") : text.index("def _double_forward")]
    assert "clamp(0, H - 1)" in backward and "torch.where" in backward
