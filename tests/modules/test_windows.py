"""Affine subscripts against torch.nn.functional (issue 25): the generated convolutions, pools,
cumulative sum and shift of tests/cases/ in float64 at 1e-10, their backward against torch's
autograd of the same F call, and gradcheck, on random shapes with odd sizes."""

from __future__ import annotations

import importlib
import inspect
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from bench.aten_calls import Counting
from tests.modules.emitted import against_autograd, imported

CASES = Path(__file__).resolve().parents[1] / "cases"


def _conv1d_padded_dilated(rng: random.Random) -> tuple:
    n, c, o, k, p = rng.choice([1, 3]), rng.choice([1, 3]), rng.choice([2, 5]), 3, 1
    x = torch.randn(n, c, rng.choice([7, 9, 11]), dtype=torch.float64)
    w, b = torch.randn(o, c, k, dtype=torch.float64), torch.randn(o, dtype=torch.float64)
    return (x, w, b), {"P": p}, lambda x, w, b: F.conv1d(x, w, b, padding=p, dilation=2)


def _conv1d_strided(rng: random.Random) -> tuple:
    n, c, o, k = rng.choice([1, 3]), rng.choice([1, 3]), rng.choice([2, 5]), rng.choice([2, 3])
    x = torch.randn(n, c, rng.choice([7, 8, 11]), dtype=torch.float64)
    w = torch.randn(o, c, k, dtype=torch.float64)
    return (x, w), {}, lambda x, w: F.conv1d(x, w, stride=2)


def _avg_pool1d(rng: random.Random) -> tuple:
    params = {"kernel": 3, "stride": rng.choice([1, 2, 3]), "padding": rng.choice([0, 1])}
    x = torch.randn(rng.choice([1, 3]), 3, rng.choice([7, 9, 10]), dtype=torch.float64)
    return (
        (x,),
        params,
        lambda x: F.avg_pool1d(x, params["kernel"], params["stride"], params["padding"]),
    )


def _avg_pool1d_excluding_padding(rng: random.Random) -> tuple:
    params = {"kernel": 3, "stride": rng.choice([1, 2, 3]), "padding": rng.choice([0, 1])}
    x = torch.randn(rng.choice([1, 3]), 3, rng.choice([7, 9, 10]), dtype=torch.float64)
    k, s, p = params["kernel"], params["stride"], params["padding"]
    return (x,), params, lambda x: F.avg_pool1d(x, k, s, p, count_include_pad=False)


def _conv2d_strided_bias(rng: random.Random) -> tuple:
    n, c, o = rng.choice([1, 2]), rng.choice([1, 3]), rng.choice([2, 4])
    params = {"S": rng.choice([1, 2]), "P": rng.choice([0, 1])}
    x = torch.randn(n, c, rng.choice([5, 7, 8]), rng.choice([6, 9]), dtype=torch.float64)
    w = torch.randn(o, c, rng.choice([2, 3]), 3, dtype=torch.float64)
    b = torch.randn(o, dtype=torch.float64)
    return (
        (x, w, b),
        params,
        lambda x, w, b: F.conv2d(x, w, b, stride=params["S"], padding=params["P"]),
    )


def _max_pool2d(rng: random.Random) -> tuple:
    params = {"kernel": rng.choice([2, 3]), "stride": rng.choice([1, 2, 3])}
    x = torch.randn(rng.choice([1, 2]), 3, rng.choice([6, 7]), rng.choice([5, 8]))
    return (
        (x.double(),),
        params,
        lambda x: F.max_pool2d(x, params["kernel"], params["stride"]),
    )


def _avg_pool2d(rng: random.Random) -> tuple:
    params = {"kernel": 3, "stride": rng.choice([1, 2, 3]), "padding": rng.choice([0, 1])}
    x = torch.randn(rng.choice([1, 2]), 3, rng.choice([6, 7]), rng.choice([5, 8]))
    return (
        (x.double(),),
        params,
        lambda x: F.avg_pool2d(x, params["kernel"], params["stride"], params["padding"]),
    )


def _cumsum(rng: random.Random) -> tuple:
    x = torch.randn(rng.choice([1, 3]), rng.choice([5, 7]), dtype=torch.float64)
    return (x,), {}, lambda x: torch.cumsum(x, 1)


def _cumsum_strict(rng: random.Random) -> tuple:
    x = torch.randn(rng.choice([1, 3]), rng.choice([5, 7]), dtype=torch.float64)
    before = lambda x: torch.cumsum(x, 1) - x  # noqa: E731
    after = lambda x: x.flip(1).cumsum(1).flip(1) - x  # noqa: E731
    return (x,), {}, lambda x: before(x) * after(x)


def _shift(rng: random.Random) -> tuple:
    x, y = (torch.randn(3, rng.choice([5, 7]), dtype=torch.float64) for _ in range(2))
    return (x, y), {}, lambda x, y: torch.tanh(F.pad(x, (1, 0))[:, :-1]) * y


TORCH = {
    "conv1d_padded_dilated": _conv1d_padded_dilated,
    "conv1d_strided": _conv1d_strided,
    "avg_pool1d": _avg_pool1d,
    "avg_pool1d_excluding_padding": _avg_pool1d_excluding_padding,
    "conv2d_strided_bias": _conv2d_strided_bias,
    "max_pool2d": _max_pool2d,
    "avg_pool2d": _avg_pool2d,
    "cumsum": _cumsum,
    "cumsum_strict": _cumsum_strict,
    "shift": _shift,
}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", sorted(TORCH))
def test_against_torch_functional(name: str, seed: int, tmp_path: Path) -> None:
    module, op = imported(CASES / f"{name}.py", tmp_path)
    inputs, params, reference = TORCH[name](random.Random(seed))
    out, saved = module.forward(*inputs, **params)
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    ref = reference(*leaves)
    assert out.shape == ref.shape
    assert torch.allclose(out, ref.detach(), rtol=0, atol=1e-10)
    grad_out = torch.randn_like(out)
    mine = module.backward(grad_out, saved)
    theirs = torch.autograd.grad(ref, leaves, grad_out)
    for a, b in zip(mine, theirs, strict=True):
        assert a.shape == b.shape and torch.allclose(a, b, rtol=0, atol=1e-10)
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    apply = module.Function.apply  # params positionally, after the tensors, as declared
    extra = tuple(params[k] for k in op.params)
    assert torch.autograd.gradcheck(apply, (*leaves, *extra))
    assert torch.autograd.gradgradcheck(apply, (*leaves, *extra))


@pytest.mark.parametrize("case", ["ties", "nan"])
def test_a_max_pool_breaks_ties_and_keeps_nan_as_torch_does(case: str, tmp_path: Path) -> None:
    """Windows full of equal entries (a few integer values) route each gradient to the first
    maximum in row-major order, and a NaN is its window's maximum, exactly as F.max_pool2d's
    forward and autograd; in the pool's lowering (max_pool2d) and in forward mode's gather at
    the argmax's digits. The cases' max pool reads a plain x: tests/cases/max_pool2d.py."""
    module, _ = imported(CASES / "max_pool2d.py", tmp_path)
    gen = torch.Generator().manual_seed(7)
    x = torch.randint(0, 3, (2, 3, 7, 8), generator=gen).double()
    if case == "nan":
        x[0, 1, 2, 3] = x[1, 2, 5, 0] = float("nan")
    params = {"kernel": 3, "stride": 2}
    out, saved = module.forward(x, **params)
    leaf = x.clone().requires_grad_(True)
    ref = F.max_pool2d(leaf, 3, 2)
    assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.nan_to_num(), ref.nan_to_num())
    grad_out = torch.randn_like(out)
    (dx,) = module.backward(grad_out, saved)
    (theirs,) = torch.autograd.grad(ref, leaf, grad_out)
    assert torch.equal(dx, theirs)
    tangent = torch.randn_like(x)
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(x, tangent)
        ref_t = torch.autograd.forward_ad.unpack_dual(F.max_pool2d(dual, 3, 2)).tangent
    assert torch.equal(module._jvp(x, tangent, **params), ref_t)


@pytest.mark.parametrize("name", ["max_pool2d", "avg_pool2d"])
def test_a_pool_given_its_kernel_alone_strides_by_it_as_torch(name: str) -> None:
    """``apply(x, 3)`` is ``F.max_pool2d(x, 3)``: windows 3 apart (the stride defaulted to 2,
    silently other windows; found probing). The op file's ``"stride": "kernel_size"``."""
    module = importlib.import_module(f"generated.{name}")
    torch_op = getattr(F, name)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 7, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    for args in ((3,), (2,), (3, 1), (3, 2)):
        out = module.Function.apply(x, *args)
        ref = torch_op(x, *args)
        assert out.shape == ref.shape and torch.allclose(out, ref, rtol=0, atol=1e-14)
        g = torch.randn_like(ref)
        (mine,), (theirs,) = (torch.autograd.grad(y, x, g) for y in (out, ref))
        assert torch.allclose(mine, theirs, rtol=0, atol=1e-14)
    out, _ = module.forward(x.detach(), kernel_size=3)
    assert out.shape == torch_op(x, 3).shape


def test_a_shifted_read_is_a_view_and_a_pad(tmp_path: Path) -> None:
    """``x[n, c, i + 1, j]``, a total-variation loss's finite difference, is x cropped and
    padded along that axis (zeros past the end, the language's padding), forward and
    backward; an index grid, a clamp and a mask gathered it, 8x autograd's time (found
    probing). Against autograd through slices, and no indexing call at all."""
    path = tmp_path / "tv.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='tv', inputs=['x[N, C, H, W]'], definitions=["
        "'loss = Sum(where(i < H - 1, (x[n, c, i + 1, j] - x[n, c, i, j])**2, 0), n, c, i, j)"
        " + Sum(where(j > 0, (x[n, c, i, j] - x[n, c, i, j - 1])**2, 0), n, c, i, j)'])\n"
    )
    module, _ = imported(path, tmp_path)
    x = torch.randn(2, 3, 5, 7, dtype=torch.float64)
    leaf = x.clone().requires_grad_()
    want = ((leaf[:, :, 1:] - leaf[:, :, :-1]) ** 2).sum() + (
        (leaf[..., 1:] - leaf[..., :-1]) ** 2
    ).sum()
    (want_grad,) = torch.autograd.grad(want, leaf)
    with Counting() as calls:
        out, saved = module.forward(x)
        (grad,) = module.backward(torch.ones_like(out), saved)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, want_grad, rtol=1e-12, atol=1e-12)
    assert not [c for c in calls.calls if "index" in c or "gather" in c], calls.calls


def test_a_window_beside_a_sum_convolves_the_sum(tmp_path: Path) -> None:
    """A depthwise-separable convolution: dx is ``sum_t1 wd[c, P + t - t1] G[n, c, t1]`` with
    ``G = sum_o grad_out[n, o, t1] wp[o, c]``, a transposed depthwise convolution of the sum.
    Read as a product of three tensors it was a dense banded (T, T) table of wd times G,
    summed over t1: 22x autograd's time and 109x its memory (found probing). The sum is
    computed first and convolved (``reductions._window_among``). Against autograd through
    F.conv1d and a matmul, and no index or gather call."""
    path = tmp_path / "dwsep.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='dwsep', inputs=['x[N, C, T]', 'wd[C, K]',"
        " 'wp[O, C]'], sizes={'P': 'K // 2'}, ranges={'t': 'T'}, definitions=["
        "'dw[n, c, t] = Sum(x[n, c, t + k - P] * wd[c, k], k)',"
        " 'out[n, o, t] = Sum(dw[n, c, t] * wp[o, c], c)'])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(3)
    args = [
        torch.randn(s, generator=gen, dtype=torch.float64) for s in ((2, 6, 11), (6, 5), (4, 6))
    ]
    leaves = [a.clone().requires_grad_() for a in args]
    x, wd, wp = leaves
    want = torch.einsum("oc,nct->not", wp, F.conv1d(x, wd[:, None], padding=2, groups=6))
    grad_out = torch.randn(want.shape, generator=gen, dtype=torch.float64)
    want_grads = torch.autograd.grad(want, leaves, grad_out)
    with Counting() as calls:
        out, saved = module.forward(*args)
        grads = module.backward(grad_out, saved)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-12)
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    assert not [c for c in calls.calls if "index" in c or "gather" in c], calls.calls


def test_a_window_nested_under_a_contraction_stays_a_convolution(tmp_path: Path) -> None:
    """``sum_{c,k} x[n, c, t + k - P] wd[c, k] wp[o, c]`` in one definition: the sum over k
    is a depthwise convolution, then a matmul with wp. Flattened into one einsum, x's window
    read was an operand unfolded K times (x copied K-fold, 2.2x autograd's time)."""
    path = tmp_path / "dwmix.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='dwmix', inputs=['x[N, C, T]', 'wd[C, K]',"
        " 'wp[O, C]'], sizes={'P': 'K // 2'}, ranges={'t': 'T'}, definitions=["
        "'out[n, o, t] = Sum(x[n, c, t + k - P] * wd[c, k] * wp[o, c], c, k)'])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(8)
    args = [
        torch.randn(s, generator=gen, dtype=torch.float64) for s in ((2, 6, 11), (6, 5), (4, 6))
    ]
    x, wd, wp = (a.clone().requires_grad_() for a in args)
    want = torch.einsum("oc,nct->not", wp, F.conv1d(x, wd[:, None], padding=2, groups=6))
    with Counting() as calls:
        out, _ = module.forward(*args)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-12)
    assert calls.calls["convolution"] == 1 and not calls.calls["unfold"], calls.calls


@pytest.mark.parametrize(
    "kernel",
    [
        "ws[o, c, p, q] = w[o, c, p, q] * g[o]",
        "ws[o, c, p, q] = (w[o, c, p, q] - mu[o]) / sqrt(var[o] + 1e-5)",
    ],
    ids=["scaled", "standardised"],
)
def test_a_convolution_by_an_intermediate_kernel_is_transposed_for_dx(kernel, tmp_path) -> None:
    """A kernel the op computes (a per-channel gain, weight standardisation): dx reads it at
    shifted subscripts, inlined with a gain beside it or clamped under the gates of its
    range. Both were a dense Toeplitz gather over (H, H, W, W), 447x autograd's time, and a
    34 GB request at (32, 64, 64, 64) (found probing); now the gain goes with grad_out
    (``reductions._beside_a_window``) and the clamped read is the padded one
    (``_padded_under_gates``): one transposed convolution, no index or gather call."""
    path = tmp_path / "wconv.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='wconv', inputs=['x[N, C, H, W]', 'w[O, C, KH,"
        " KW]', 'g[O]'], ranges={'i': 'H', 'j': 'W'}, definitions=['mu[o] = Sum(w[o, c, p, q],"
        " c, p, q) / (C * KH * KW)', 'var[o] = Sum((w[o, c, p, q] - mu[o])**2, c, p, q) / (C *"
        f" KH * KW)', {kernel!r}, 'out[n, o, i, j] = Sum(x[n, c, i + p - 1, j + q - 1] * ws[o,"
        " c, p, q], c, p, q) * g[o]'])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(9)
    shapes = ((2, 3, 6, 5), (4, 3, 3, 3), (4,))
    args = [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]
    x, w, g = (a.clone().requires_grad_() for a in args)
    if "mu" in kernel:
        mu = w.mean((1, 2, 3), keepdim=True)
        ws = (w - mu) / torch.sqrt(((w - mu) ** 2).mean((1, 2, 3), keepdim=True) + 1e-5)
    else:
        ws = w * g[:, None, None, None]
    want = F.conv2d(x, ws, padding=1) * g[:, None, None]
    grad_out = torch.randn(want.shape, generator=gen, dtype=torch.float64)
    want_grads = torch.autograd.grad(want, (x, w, g), grad_out)
    out, saved = module.forward(*args)
    with Counting() as calls:
        grads = module.backward(grad_out, saved)
    torch.testing.assert_close(out, want.detach(), rtol=1e-12, atol=1e-12)
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-11, atol=1e-12)
    assert not [c for c in calls.calls if "index" in c or "gather" in c], calls.calls


def test_a_kernel_computed_from_its_taps_is_a_table_for_dx(tmp_path: Path) -> None:
    """A Gaussian blur, its kernel ``exp(-((p - R)**2 + (q - R)**2) / 2 s**2)`` written as a
    function of the taps: dx reads it at ``p = clamp(R + h - h1, 0, K - 1)``, and computed
    there it was a dense table over (H, H, W, W), 253x autograd's time (found surveying).
    Tabulated over the taps (``reductions._tabulated``), it is a kernel read at a shifted
    subscript: one transposed convolution, no table wider than K x K. Against autograd
    through a depthwise F.conv2d."""
    path = tmp_path / "blur.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='blur', inputs=['x[N, C, H, W]'],"
        " params={'R': 2, 's': 1.5}, sizes={'K': '2 * R + 1'}, ranges={'p': 'K', 'q': 'K',"
        " 'i': 'H', 'j': 'W'}, definitions=['out[n, c, i, j] = Sum(x[n, c, i + p - R, j + q -"
        " R] * exp(-((p - R)**2 + (q - R)**2) / (2 * s**2)), p, q)'])\n"
    )
    module, _ = imported(path, tmp_path)
    (x,) = args = [torch.randn(2, 3, 9, 7, dtype=torch.float64)]
    taps = torch.arange(5, dtype=torch.float64) - 2
    kernel = torch.exp(-(taps[:, None] ** 2 + taps**2) / (2 * 1.5**2))

    def ref(x):
        return F.conv2d(x, kernel.expand(3, 1, 5, 5), padding=2, groups=3)

    generated, autograd = against_autograd(module, args, ref, torch.Generator().manual_seed(4))
    assert generated <= autograd, (generated, autograd)


@pytest.mark.parametrize("n, c", [(2, 3), (0, 3)])
def test_one_kernel_shared_by_every_channel_is_a_depthwise_convolution(n, c, tmp_path) -> None:
    """``sum_{p,q} x[n, c, i + p - 2, j + q - 2] k[p, q]``, one kernel for every channel:
    the (N, C) rows are the channels of one image and the kernel is repeated per channel
    (``windows._one_channel``), where a batch of N C one-channel images ran torch's slow path
    (conv_transpose2d 20x slower at (8, 16, 128, 128)); k's gradient correlates each channel
    apart and sums them (``windows._channels_apart``), where one output channel over N C
    contracted ones unfolded x (100 ms against 4.4). Every convolution is grouped; an empty
    batch gives zeros, as torch's own conv does. Against autograd through F.conv2d."""
    path = tmp_path / "shared_kernel.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='shared_kernel', inputs=['x[N, C, H, W]',"
        " 'k[KH, KW]'], ranges={'i': 'H', 'j': 'W'}, definitions=['out[n, c, i, j] ="
        " Sum(x[n, c, i + p - 2, j + q - 2] * k[p, q], p, q)'])\n"
    )
    module, _ = imported(path, tmp_path)
    args = [torch.randn(n, c, 8, 7, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)]

    def ref(x, k):
        return F.conv2d(F.pad(x, (2, 1, 2, 2)), k.expand(c, 1, 5, 4), groups=c)

    with Counting() as calls:
        against_autograd(module, args, ref, torch.Generator().manual_seed(5))
    assert not [name for name in calls.calls if "index" in name or "gather" in name]
    code = inspect.getsource(module.forward) + inspect.getsource(module.backward)
    assert code.count("torch.conv") == code.count("groups=") == 3, code
    if n:
        leaves = tuple(a.clone().requires_grad_() for a in args)
        assert torch.autograd.gradcheck(module.Function.apply, leaves)


def test_element_wise_work_under_a_window_is_named_for_the_kernel(tmp_path: Path) -> None:
    """A local response norm: its forward sums ``x[n, c + m - P, i, j]**2`` over a channel
    window, and its adjoint sums ``where(0 <= c - c1 + P <= S - 1, F[n, c1, i, j], 0)`` with
    F a product of five tensors and a power. The window rules match a read, so the work is
    named over its own axes first (``reductions._named_for_a_window``): a window sum of
    ``x * x``, and a window indicator over F, each one depthwise convolution with ones. The
    adjoint had been a dense C x C band over (N, C, H, W, C), 2.2x autograd's time and 8.4x
    its memory (found surveying). Against autograd through F.local_response_norm, within
    its widest tensor."""
    path = tmp_path / "lrn.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='lrn', inputs=['x[N, C, H, W]'], params={'size':"
        " 5, 'alpha': 0.01, 'beta': 0.75, 'kk': 2.0}, sizes={'S': 'size', 'P': 'size // 2'},"
        " ranges={'m': 'S', 'c': 'C'}, definitions=['den[n, c, i, j] = (kk + alpha / S *"
        " Sum(x[n, c + m - P, i, j]**2, m))**beta', 'out[n, c, i, j] = x[n, c, i, j] / den[n,"
        " c, i, j]'])\n"
    )
    module, _ = imported(path, tmp_path)
    args = [torch.randn(2, 7, 3, 4, dtype=torch.float64) * 3]

    def ref(x):
        return F.local_response_norm(x, 5, 0.01, 0.75, 2.0)

    generated, autograd = against_autograd(module, args, ref, torch.Generator().manual_seed(6))
    assert generated <= autograd, (generated, autograd)
