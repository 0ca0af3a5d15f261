"""Range: where the forward is finite, the generated forward and backward are finite and exact.

The ops are written the natural way (tests/cases/); the identity tables in derive/identities.py
rewrite them (1/(1 + e^-z) -> sigmoid, log(1 + e^x) -> softplus, log(sigmoid) -> -softplus(-z)).
References are written independently in torch with range-safe functions (logaddexp).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from derive.emit.generate import load_op
from derive.language import parse
from derive.symbolic.derivation import derive
from tests.modules.emitted import imported

CASES = Path(__file__).resolve().parents[1] / "cases"
EXTREMES = torch.tensor(
    [-1e4, -800.0, -40.0, -1.0, 0.0, 2.0, 40.0, 800.0, 1e4], dtype=torch.float64
)

# a collapsed difference, binary cross-entropy's g (s - y) / N or a softmax's p - onehot, is 0
# where s or p rounds to 1 (z > 37) against an exact e^-z: an absolute error below one ulp of
# the gradient scale (torch's fused losses compute the same differences)
GRAD_ATOL = 1e-16


def _softplus(x: torch.Tensor) -> torch.Tensor:
    return torch.logaddexp(x, torch.zeros_like(x))


def _module(name: str, tmp_path: Path):
    return imported(CASES / f"{name}.py", tmp_path)


def _written(tmp_path: Path, name: str, inputs: list[str], definitions: list[str]):
    """The module of an op written here (a file of its own, as a user writes one)."""
    (tmp_path / "ops").mkdir(exist_ok=True)
    text = f"from derive import Op\n\nOP = Op({name!r}, {inputs!r}, {definitions!r})\n"
    (tmp_path / "ops" / f"{name}.py").write_text(text)
    return imported(tmp_path / "ops" / f"{name}.py", tmp_path)[0]


def _reference_grad(f, *inputs):
    leaves = [x.clone().requires_grad_(True) for x in inputs]
    out = f(*leaves)
    return out.detach(), torch.autograd.grad(out.sum(), leaves)


def test_log_sigmoid_loss_collapses_and_stays_finite(tmp_path: Path) -> None:
    d = derive(parse(load_op(CASES / "log_sigmoid_loss.py")))
    # 1 - s keeps no relative accuracy where s rounds to 1: the complement is sigmoid(-z)
    assert str(d.final["z"]) == "-grad_out*sigmoid(-z[n])/N"
    module, _ = _module("log_sigmoid_loss", tmp_path)
    loss, saved = module.forward(EXTREMES)
    (dz,) = module.backward(torch.tensor(1.0, dtype=torch.float64), saved)
    want, (want_dz,) = _reference_grad(lambda z: _softplus(-z).mean(), EXTREMES)
    assert torch.isfinite(loss) and torch.isfinite(dz).all()
    assert torch.allclose(loss, want, rtol=1e-12, atol=0)
    assert torch.allclose(dz, want_dz, rtol=1e-12, atol=0)


def test_binary_cross_entropy_collapses_to_s_minus_y(tmp_path: Path) -> None:
    d = derive(parse(load_op(CASES / "binary_cross_entropy.py")))
    assert str(d.final["z"]) == "grad_out*(s[n] - y[n])/N"
    module, _ = _module("binary_cross_entropy", tmp_path)
    y = torch.linspace(0, 1, len(EXTREMES), dtype=torch.float64)
    loss, saved = module.forward(EXTREMES, y)
    dz, dy = module.backward(torch.tensor(1.0, dtype=torch.float64), saved)

    def reference(z, y):  # -[y log s + (1 - y) log(1 - s)] with log s = -softplus(-z)
        return (y * _softplus(-z) + (1 - y) * _softplus(z)).mean()

    want, (want_dz, want_dy) = _reference_grad(reference, EXTREMES, y)
    assert torch.isfinite(loss) and torch.isfinite(dz).all() and torch.isfinite(dy).all()
    assert torch.allclose(loss, want, rtol=1e-12)
    assert torch.allclose(dz, want_dz, rtol=1e-12, atol=GRAD_ATOL)
    assert torch.allclose(dy, want_dy, rtol=1e-12)


@pytest.mark.parametrize("x", [-800.0, -40.0, -1.0, 0.0, 1.0, 40.0, 800.0])
def test_mish_is_finite_and_exact(x: float, tmp_path: Path) -> None:
    module, _ = _module("mish", tmp_path)
    xs = torch.tensor([x], dtype=torch.float64)
    out, saved = module.forward(xs)
    (dx,) = module.backward(torch.ones_like(out), saved)
    want, (want_dx,) = _reference_grad(lambda v: v * torch.tanh(_softplus(v)), xs)
    assert torch.isfinite(out).all() and torch.isfinite(dx).all()
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-300)
    assert torch.allclose(dx, want_dx, rtol=1e-12, atol=1e-300)


def test_shifted_softplus_is_finite_and_exact(tmp_path: Path) -> None:
    module, _ = _module("shifted_softplus", tmp_path)
    p, q = EXTREMES, EXTREMES.flip(0)
    y, saved = module.forward(p, q)
    dp, dq = module.backward(torch.ones_like(y), saved)

    def reference(p, q):  # log(1 + 2 e^p) = logaddexp(0, p + log 2)
        two = torch.full_like(p, 2.0).log()
        return _softplus(p + two) + torch.logaddexp(p, q)

    want, (want_dp, want_dq) = _reference_grad(reference, p, q)
    assert torch.isfinite(y).all() and torch.isfinite(dp).all() and torch.isfinite(dq).all()
    assert torch.allclose(y, want, rtol=1e-12)
    assert torch.allclose(dp, want_dp, rtol=1e-12, atol=GRAD_ATOL)
    assert torch.allclose(dq, want_dq, rtol=1e-12, atol=GRAD_ATOL)


def test_a_tensor_the_output_does_not_read_gets_a_zero_gradient(tmp_path: Path) -> None:
    module, _ = _module("dead_branch", tmp_path)
    b = torch.tensor([30.0, -30.0, 1.0], dtype=torch.float64)  # b**3 overflows cosh
    v = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    u, saved = module.forward(b, v)
    db, dv = module.backward(torch.tensor(1.0, dtype=torch.float64), saved)
    assert torch.equal(db, torch.zeros_like(b))
    assert torch.equal(dv, 2 * v)
    grads = module.backward_all(torch.tensor(1.0, dtype=torch.float64), saved)
    assert torch.equal(grads["a1"], torch.zeros_like(b))


def test_sech_gain_backward_keeps_range(tmp_path: Path) -> None:
    # at |e| = 450 cosh(e)**2 is inf, and exp(g) sinh(e) with g = 300 is too; tanh/cosh is not
    module, _ = _module("sech_gain", tmp_path)
    g = torch.tensor([[300.0, -2.0], [0.5, 1.0]], dtype=torch.float64)
    e = torch.tensor([450.0, -450.0, 0.3], dtype=torch.float64)
    out, saved = module.forward(g, e)
    grad_out = torch.ones_like(out)
    dg, de = module.backward(grad_out, saved)
    want, (want_dg, want_de) = _reference_grad(
        lambda g, e: torch.exp(g).T[None] / torch.cosh(e)[:, None, None], g, e
    )
    assert torch.isfinite(out).all() and torch.isfinite(dg).all() and torch.isfinite(de).all()
    assert torch.allclose(out, want, rtol=1e-12)
    assert torch.allclose(dg, want_dg, rtol=1e-12)
    assert torch.allclose(de, want_de, rtol=1e-12, atol=1e-300)


def test_a_gathered_quotient_folds_to_its_saved_value(tmp_path: Path) -> None:
    """``Wq = Max(logits[c]**2, c)`` of ``logits[a] = 1 / Sum_p e^s[p] sigmoid(x[a])``: the
    backward is ``-2 g e^s[p] / (sigmoid(x[w])**2 S**3)`` at the argmax w, whose
    ``g / sigmoid**2`` overflows at x = -360 where ``Wq = logits[w]**2`` is 1.4e52. Folded to
    ``logits[w]**2 e^s[p] / S`` (the simplifier takes sigmoid out of the sum, and the fold
    pattern is tried in that form too) it is finite (fuzz --range 11700408, shrunk)."""
    module = _written(
        tmp_path,
        "gathered_quotient",
        ["s[P]", "x[A]"],
        ["logits[a] = 1/Sum(exp(s[p])*sigmoid(x[a]), p)", "Wq = Max(logits[c]**2, c)"],
    )
    s = torch.tensor([300.0, 0.0, -1.0], dtype=torch.float64)
    x = torch.tensor([-360.0, 0.5], dtype=torch.float64)
    out, saved = module.forward(s, x)
    ds, dx = module.backward(torch.ones_like(out), saved)

    def reference(s, x):
        return (1 / (torch.exp(s)[:, None] * torch.sigmoid(x)[None]).sum(0)).square().amax()

    want, (want_ds, want_dx) = _reference_grad(reference, s, x)
    assert torch.isfinite(out) and torch.isfinite(ds).all() and torch.isfinite(dx).all()
    assert torch.allclose(out, want, rtol=1e-12)
    assert torch.allclose(ds, want_ds, rtol=1e-12)
    assert torch.allclose(dx, want_dx, rtol=1e-12)


def test_a_saturated_tanh_of_an_overflowing_product_keeps_range(tmp_path: Path) -> None:
    module, _ = _module("saturated_tanh_of_a_product", tmp_path)
    w1 = torch.tensor([[450.0, -450.0], [-450.0, 450.0]], dtype=torch.float64)
    hid, saved = module.forward(w1)
    (dw1,) = module.backward(torch.ones_like(hid), saved)

    def reference(w1):
        logits = torch.sinh(w1).amax(0)
        return torch.tanh(torch.exp(-w1) * logits[:, None]).T

    want, (want_dw1,) = _reference_grad(reference, w1)
    assert torch.isfinite(hid).all() and torch.isfinite(dw1).all()
    assert torch.allclose(hid, want, rtol=1e-12)
    # dW1 at W1 = 450 is 0 as the sum of two terms of about 0.39 that cancel: one through
    # (h**2 - 1) rounded, the other through addcmul's s - s h**2, which torch's kernel computes
    # as one fused multiply-add on an AVX-512 Xeon: exactly 0 on some CPUs, an ulp (-5.6e-17)
    # on that one
    assert torch.allclose(dw1, want_dw1, rtol=1e-12, atol=1e-15)


def test_a_max_shifted_exp_read_through_a_gather_keeps_its_bound(tmp_path: Path) -> None:
    # fuzz --range 730268: gain = 1.25 exp(s) at s ~ 421 is ~1e183, and out = exp(gain - top)
    # is <= 1 because the forward rounds gain before its max is taken. The backward once
    # recomputed gain - top as one fused multiply-add (torch.add(-top, exp(s), alpha=1.25)),
    # which keeps the product's bits the forward rounded away: +1e167 at the max, exp = inf,
    # ds NaN (448 of 768 entries on an AVX-512 Xeon). A pattern bound through the gather's
    # subscript labels[n] now folds, so the backward reads the forward's own out and gain.
    module, _ = _module("max_shifted_exp_of_a_gather", tmp_path)
    d = derive(parse(load_op(CASES / "max_shifted_exp_of_a_gather.py")))
    assert {"gain", "out"} <= set(d.saved) and "s" not in d.saved
    torch.manual_seed(0)
    s = 421.0 + torch.rand(4, 3, 64, dtype=torch.float64)
    labels = torch.tensor([2, 0, 2, 1, 1, 0, 2, 2])
    grad_out = torch.randn(4, 64, 8, dtype=torch.float64)
    out, saved = module.forward(s, labels)
    ds, _ = module.backward(grad_out, saved)

    def reference(s):
        gain = 1.25 * torch.exp(s[:, labels, :]).permute(0, 2, 1)
        return torch.exp(gain - gain.amax(1, keepdim=True))

    leaf = s.clone().requires_grad_(True)
    want = reference(leaf)
    (want_ds,) = torch.autograd.grad(want, leaf, grad_out)
    assert torch.isfinite(out).all() and torch.isfinite(ds).all()
    assert torch.allclose(out, want.detach(), rtol=1e-12)
    assert torch.allclose(ds, want_ds, rtol=1e-12, atol=1e-300)


def test_a_max_shifted_exp_is_multiplied_before_a_large_factor(tmp_path: Path) -> None:
    # fuzz --range --powers 1044206, shrunk: dp = g m exp(p) exp(W - m), with m = 1.9e130 and
    # exp(p) = 2.5e182 where W = -2.5e182 (x = -1): exp(W - m) is 0, and the product was
    # formed (g m) exp(p) = inf first, inf * 0 = nan; autograd's chain order is finite
    module, _ = _module("max_shifted_exp_times_its_max", tmp_path)
    x = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    p = torch.tensor([[420.0, 0.5], [300.0, -0.3]], dtype=torch.float64)
    grad_out = torch.tensor([1.0, 0.7], dtype=torch.float64)
    out, saved = module.forward(x, p)
    dx, dp = module.backward(grad_out, saved)

    def reference(x, p):
        w = x[:, None] * torch.exp(p)
        m = w.amax(0)
        return m * torch.exp(w - m).sum(0)

    leaves = [x.clone().requires_grad_(True), p.clone().requires_grad_(True)]
    want = reference(*leaves)
    want_dx, want_dp = torch.autograd.grad(want, leaves, grad_out)
    assert torch.isfinite(out).all() and torch.isfinite(want_dx).all()
    assert torch.isfinite(dx).all() and torch.isfinite(dp).all()
    assert torch.allclose(out, want.detach(), rtol=1e-12)
    # dx[1] (the argmax's, 1.9e130 exactly) cancels to rounding noise in both: not compared
    assert torch.allclose(dx[0], want_dx[0], rtol=1e-12)
    assert torch.allclose(dp, want_dp, rtol=1e-12)


def test_softmax_entropy_is_finite_at_saturated_logits(tmp_path: Path) -> None:
    module, _ = _module("softmax_entropy", tmp_path)
    x = torch.tensor(
        [[1e4, -1e4, 0.0], [1.0, 2.0, 3.0], [-800.0, 800.0, 800.0]], dtype=torch.float64
    )
    out, saved = module.forward(x)
    (dx,) = module.backward(torch.ones_like(out), saved)

    def reference(v):  # log_softmax is range-safe where log(softmax) is not
        return -(torch.softmax(v, 1) * torch.log_softmax(v, 1)).sum(1)

    want, (want_dx,) = _reference_grad(reference, x)
    assert torch.isfinite(out).all() and torch.isfinite(dx).all()
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-300)
    assert torch.allclose(dx, want_dx, rtol=1e-12, atol=GRAD_ATOL)


def test_log_of_a_product_of_two_negatives_is_finite(tmp_path: Path) -> None:
    module, _ = _module("log_of_a_product", tmp_path)
    x = torch.tensor([-2.0, 2.0, -0.5], dtype=torch.float64)
    y = torch.tensor([-3.0, 3.0, -4.0], dtype=torch.float64)
    z = torch.tensor([-1.0, 5.0, -2.0], dtype=torch.float64)
    out, saved = module.forward(x, y, z)
    grads = module.backward(torch.ones_like(out), saved)
    want, want_grads = _reference_grad(
        lambda a, b, c: torch.log(a * b) + torch.log(torch.exp(a) * b * c), x, y, z
    )
    assert torch.isfinite(out).all()
    assert torch.allclose(out, want, rtol=1e-14)
    for got, ref in zip(grads, want_grads, strict=True):
        assert torch.allclose(got, ref, rtol=1e-14)


def test_a_gated_exp_in_the_backward_is_selected_not_multiplied(tmp_path: Path) -> None:
    module, _ = _module("elu_by_hand", tmp_path)
    out, saved = module.forward(EXTREMES)
    (dx,) = module.backward(torch.ones_like(out), saved)
    want, (want_dx,) = _reference_grad(torch.nn.functional.elu, EXTREMES)
    assert torch.isfinite(out).all() and torch.isfinite(dx).all()
    assert torch.allclose(out, want, rtol=1e-14) and torch.allclose(dx, want_dx, rtol=1e-14)


SATURATED = torch.tensor(
    [[1e4, -1e4, 0.0, 3.0], [1.0, 2.0, 3.0, 4.0], [-800.0, 800.0, 800.0, -1e4]],
    dtype=torch.float64,
)


@pytest.mark.parametrize("case", ["cross_entropy_by_hand", "cross_entropy_as_logsumexp"])
def test_cross_entropy_by_hand_collapses_and_stays_finite(case: str, tmp_path: Path) -> None:
    """By hand, ``-log(p[n, y[n]])`` of a max-shifted softmax; as a logsumexp written
    unshifted, ``log(Sum(exp(x[n, k]), k)) - x[n, y[n]]``, which overflows at logits of 1e4
    (inf loss, NaN gradient) until the parser shifts it by its maximum. Either collapses to
    ``(softmax - onehot) / N``: no log(p), no 1 / p, no argmax saved, only y and one (N, C)
    tensor (by hand, p itself; as a logsumexp, the exps)."""
    d = derive(parse(load_op(CASES / f"{case}.py")))
    assert len(d.saved) == 2 and d.saved[0] == "y"
    module, _ = _module(case, tmp_path)
    y = torch.tensor([1, 0, 3])
    loss, saved = module.forward(SATURATED, y)
    dx, _ = module.backward(torch.tensor(1.0, dtype=torch.float64), saved)
    want, (want_dx,) = _reference_grad(lambda v: torch.nn.functional.cross_entropy(v, y), SATURATED)
    assert torch.isfinite(loss) and torch.isfinite(dx).all()
    assert torch.allclose(loss, want, rtol=1e-14)
    assert torch.allclose(dx, want_dx, rtol=1e-12, atol=GRAD_ATOL)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_jensen_shannon_divergence_stays_finite_where_both_softmaxes_underflow(
    dtype: torch.dtype, tmp_path: Path
) -> None:
    module, _ = _module("jensen_shannon", tmp_path)
    big = 800.0 if dtype == torch.float64 else 120.0
    a = torch.tensor([[big, -big, 0.0], [1.0, 2.0, 3.0]], dtype=dtype)
    b = torch.tensor([[-big, big, 0.0], [3.0, 1.0, -2.0]], dtype=dtype)
    out, saved = module.forward(a, b)
    da, db = module.backward(torch.tensor(1.0, dtype=dtype), saved)

    def reference(x, y):  # the stable form: a logaddexp of the two log-softmaxes
        lp, lq = x.log_softmax(1), y.log_softmax(1)
        lm = torch.logaddexp(lp, lq) - math.log(2)
        return (lp.exp() * (lp - lm) + lq.exp() * (lq - lm)).sum() / (2 * x.shape[0])

    want, (want_da, want_db) = _reference_grad(reference, a.double(), b.double())
    assert torch.isfinite(out) and torch.isfinite(da).all() and torch.isfinite(db).all()
    rtol = 1e-11 if dtype == torch.float64 else 1e-5
    assert torch.allclose(out.double(), want, rtol=rtol)
    assert torch.allclose(da.double(), want_da, rtol=rtol, atol=rtol)
    assert torch.allclose(db.double(), want_db, rtol=rtol, atol=rtol)


def test_kl_to_a_softmax_written_inline_stays_finite(tmp_path: Path) -> None:
    module, _ = _module("kl_to_a_softmax", tmp_path)
    q = torch.softmax(torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4), 1)
    out, saved = module.forward(SATURATED, q)
    dx, dq = module.backward(torch.tensor(1.0, dtype=torch.float64), saved)

    def reference(v, w):
        lsm = torch.log_softmax(v, 1)
        return (w * (torch.log(w) - lsm)).sum() + lsm.sum() / v.shape[0]

    want, (want_dx, want_dq) = _reference_grad(reference, SATURATED, q)
    assert torch.isfinite(out) and torch.isfinite(dx).all() and torch.isfinite(dq).all()
    assert torch.allclose(out, want, rtol=1e-12)
    assert torch.allclose(dx, want_dx, rtol=1e-12, atol=GRAD_ATOL)
    assert torch.allclose(dq, want_dq, rtol=1e-12)


def test_log_of_two_sigmoids_splits_then_reads_each_as_a_softplus(tmp_path: Path) -> None:
    module, _ = _module("log_of_two_sigmoids", tmp_path)
    z = EXTREMES.flip(0)
    out, saved = module.forward(EXTREMES, z)
    dx, dz = module.backward(torch.ones_like(out), saved)
    logsig = torch.nn.functional.logsigmoid
    want, (want_dx, want_dz) = _reference_grad(lambda a, b: logsig(a) + logsig(b), EXTREMES, z)
    assert torch.isfinite(out).all() and torch.isfinite(dx).all() and torch.isfinite(dz).all()
    assert torch.allclose(out, want, rtol=1e-14)
    assert torch.allclose(dx, want_dx, rtol=1e-12, atol=0)
    assert torch.allclose(dz, want_dz, rtol=1e-12, atol=0)


def _focal(v: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    lp = torch.log_softmax(v, 1).gather(1, y[:, None]).squeeze(1)
    return -((1 - lp.exp()) ** 2 * lp).mean()


def _poly(v: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    lp = torch.log_softmax(v, 1)
    return (q * (2 * (1 - lp.exp()) - lp)).sum() / v.shape[0]


@pytest.mark.parametrize(
    "name, second, reference",
    [
        ("focal_loss_by_hand", torch.tensor([1, 0, 3]), _focal),
        ("poly_loss_by_hand", torch.softmax(SATURATED.new_tensor(range(12)).view(3, 4), 1), _poly),
    ],
)
def test_a_log_softmax_times_a_function_of_p_stays_finite(
    name: str, second: torch.Tensor, reference, tmp_path: Path
) -> None:
    """d log p = dp / p: the 1/p (S exp(m - x), inf where p underflows) cancels against p's own
    derivative only once multiplied out, where the whole product is not (simplify.cancel_exps)."""
    module, _ = _module(name, tmp_path)
    out, saved = module.forward(SATURATED, second)
    dx = module.backward(torch.tensor(1.0, dtype=torch.float64), saved)[0]
    want, (want_dx,) = _reference_grad(lambda v: reference(v, second), SATURATED)
    assert torch.isfinite(out) and torch.isfinite(dx).all()
    assert torch.allclose(out, want, rtol=1e-12)
    assert torch.allclose(dx, want_dx, rtol=1e-12, atol=GRAD_ATOL)


def _quotients(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x / (x.exp().sum() * _softplus(w)) + 1 / (x.exp().sum() * torch.cosh(w))


@pytest.mark.parametrize(("xs", "w"), [([0.5, -1.0, 2.0], -400.0), ([400.0, 399.0, -1.0], 300.0)])
def test_a_quotient_is_divided_twice_not_by_a_square(xs: list, w: float, tmp_path: Path) -> None:
    """d(a / D) = -a dD / D**2: D = S softplus(w) is 1e-174 at w = -400, its square 0 in
    float64; S = e**400 and cosh(300) squared are inf, where the gradient and tangent are
    finite. The references: the same function differentiated in mpmath at 60 digits, read
    from the definition's text, not from either generated path."""
    import mpmath

    module, _ = _module("quotient_by_a_product", tmp_path)
    x = torch.tensor(xs, dtype=torch.float64)
    wt = torch.tensor(w, dtype=torch.float64)
    out, saved = module.forward(x, wt)
    dx, dw = module.backward(torch.ones_like(out), saved)
    tangent = [0.3, -0.7, 1.1, 1.0]  # not all ones: sum_j d out / d x_j cancels d out / d w
    _, t_out = torch.func.jvp(
        module.Function.apply, (x, wt), (x.new_tensor(tangent[:3]), x.new_tensor(tangent[3]))
    )

    def f(*a):  # out over g, the definition's text with mpmath functions
        *xx, ww = a
        s = sum(mpmath.exp(v) for v in xx)
        return [v / (s * mpmath.log1p(mpmath.exp(ww))) + 1 / (s * mpmath.cosh(ww)) for v in xx]

    with mpmath.workdps(60):  # the precision set for this block only
        point = [*[mpmath.mpf(float(v)) for v in x], mpmath.mpf(w)]
        jac = [
            [
                mpmath.diff(lambda *a, i=i: f(*a)[i], point, tuple(int(j == k) for k in range(4)))
                for j in range(4)
            ]
            for i in range(3)
        ]
    want_grad = [float(sum(jac[i][j] for i in range(3))) for j in range(4)]
    want_t = [float(sum(jac[i][j] * tangent[j] for j in range(4))) for i in range(3)]
    got = [*dx.tolist(), dw.item()]
    assert all(torch.isfinite(t).all() for t in (out, dx, dw, t_out))
    assert got == pytest.approx(want_grad, rel=1e-12, abs=0)
    assert t_out.tolist() == pytest.approx(want_t, rel=1e-12, abs=0)


@pytest.mark.parametrize("seed", [1179003, 1179004, 1179005])
def test_an_exp_over_two_exp_sums_has_a_finite_gradient_near_overflow(seed: int) -> None:
    """exp(logits) / (S1 S2), S1 and S2 sums of exps of y: dy multiplied exp(logits) by exp(y)
    as one exp(logits + y), exp(898) = inf, beside a 1 / S1**2 that had underflowed: 0 * inf =
    nan where autograd's dy is finite. The fuzzer's own range judgement (fuzz/range.py: inputs
    x30 and x300, every gradient and tangent finite where the forward is, or non-finite in
    autograd too) at the seed that found it and two more draws."""
    from fuzz.range import run_range_case

    op = load_op(CASES / "exp_over_two_exp_sums.py")
    outcome = run_range_case(op, seed)
    assert outcome.status == "passed", outcome


def test_a_ratio_of_exp_sums_near_overflow_has_a_finite_tangent(tmp_path: Path) -> None:
    """S1 / S2 with both sums near 1e306: the tangent's S1 T / S2**2 must not form S1 T (inf).
    Reference: the definition's text differentiated in mpmath at 60 digits."""
    import mpmath

    module, _ = _module("ratio_of_exp_sums", tmp_path)
    a = torch.tensor([[700.0, -3.0], [703.0, 1.0]], dtype=torch.float64)  # a[i, d]
    w = torch.tensor([[704.0, 702.0, 690.0], [0.5, 2.0, -1.0]], dtype=torch.float64)  # w[d, g]
    t_a = torch.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=torch.float64)
    t_w = torch.tensor([[-0.4, 0.9, 0.6], [0.8, -0.5, 0.1]], dtype=torch.float64)
    out, t_out = torch.func.jvp(module.Function.apply, (a, w), (t_a, t_w))

    def f(h, d):  # out[d] at (a, w) + h (t_a, t_w), from the definition's text
        s1 = sum(mpmath.exp(mpmath.mpf(float(a[i, d])) + h * float(t_a[i, d])) for i in range(2))
        s2 = sum(mpmath.exp(mpmath.mpf(float(w[d, g])) + h * float(t_w[d, g])) for g in range(3))
        return s1 / s2

    with mpmath.workdps(60):  # the precision set for this block only
        want = [float(mpmath.diff(lambda h, d=d: f(h, d), 0)) for d in range(2)]
    assert torch.isfinite(out).all() and torch.isfinite(t_out).all()
    assert t_out.tolist() == pytest.approx(want, rel=1e-12, abs=0)


@pytest.mark.parametrize("row", [[0.0, 800.0], [-1e4, 0.0], [0.0, 0.0, 750.0], [5.0, -1e4, 3.0]])
def test_an_overflowing_exp_beside_its_gate_is_selected_not_multiplied(
    row: list, tmp_path: Path
) -> None:
    """A running logsumexp's exp overflows where its causal where() never reads it: the
    backward selects there (0 * inf was nan), equal to torch.logcumsumexp's gradient."""
    module, _ = _module("masked_exp_beside_its_gate", tmp_path)
    x = torch.tensor([row], dtype=torch.float64)
    out, saved = module.forward(x)
    (dx,) = module.backward(torch.ones_like(out), saved)
    want, (want_dx,) = _reference_grad(lambda a: torch.logcumsumexp(a, 1), x)
    assert torch.isfinite(dx).all(), dx
    assert torch.allclose(out, want, rtol=1e-14) and torch.allclose(dx, want_dx, rtol=1e-12)


def _second_derivative(f, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """d/dx of <w, d/dx <w, f(x)>>, by autograd's double backward through ``f``."""
    leaf = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad((f(leaf) * w).sum(), leaf, create_graph=True)
    (h,) = torch.autograd.grad((g * w).sum(), leaf)
    return h


@pytest.mark.parametrize("row", [[0.0, 800.0], [-1e4, 0.0], [0.0, 0.0, 750.0], [0.3, -0.2, 1.0]])
def test_an_overflowing_exp_beside_its_gated_adjoint_is_selected_in_the_double_backward(
    row: list, tmp_path: Path
) -> None:
    """The double backward of the running logsumexp reads the exp's adjoint, gated by the
    causal where() in an earlier statement, beside the exp (inf where the gate is 0): it
    selects, equal to torch.logcumsumexp's double backward (0 * inf was nan)."""
    module, _ = _module("masked_exp_beside_its_gate", tmp_path)
    x = torch.tensor([row], dtype=torch.float64)
    w = torch.linspace(0.5, 1.5, len(row), dtype=torch.float64)[None]
    mine = _second_derivative(module.Function.apply, x, w)
    want = _second_derivative(lambda a: torch.logcumsumexp(a, 1), x, w)
    assert torch.isfinite(mine).all(), mine
    assert torch.allclose(mine, want, rtol=1e-10, atol=1e-13), (mine, want)


def _gated_recurrence(x: torch.Tensor, la: torch.Tensor) -> torch.Tensor:
    """sum_{s <= t} exp(c[t] - c[s]) x[s], the exp taken only where s <= t (never inf)."""
    c = la.cumsum(-1)
    causal = torch.ones(x.shape[-1], x.shape[-1], dtype=torch.bool).tril()
    diff = torch.where(causal, c[:, :, None] - c[:, None, :], 0)
    return (torch.where(causal, torch.exp(diff), 0) * x[:, None, :]).sum(-1)


@pytest.mark.parametrize("scale", [1.0, 800.0])
def test_a_gated_recurrence_has_a_finite_second_derivative_where_its_exp_overflows(
    scale: float, tmp_path: Path
) -> None:
    """exp(c[t] - c[s]) overflows at s > t where the causal where() never reads it (the
    log-decays sum past -709): the double backward multiplied its adjoint (0 there) and a
    float 0/1 mask inside a contraction by it, inf and nan where autograd through the exp
    taken only where s <= t is finite. Every second derivative, against that reference."""
    module, _ = _module("gated_recurrence", tmp_path)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, dtype=torch.float64, generator=gen)
    la = -torch.rand(2, 5, dtype=torch.float64, generator=gen) * scale - 0.1
    g = torch.randn(2, 5, dtype=torch.float64, generator=gen)
    v = [torch.randn(2, 5, dtype=torch.float64, generator=gen) for _ in range(2)]

    def second(f) -> list:
        leaves = [x.clone().requires_grad_(True), la.clone().requires_grad_(True)]
        grads = torch.autograd.grad((f(*leaves) * g).sum(), leaves, create_graph=True)
        return torch.autograd.grad(sum((d * w).sum() for d, w in zip(grads, v)), leaves)

    for mine, want in zip(second(module.Function.apply), second(_gated_recurrence)):
        assert torch.isfinite(mine).all(), mine
        assert torch.allclose(mine, want, rtol=1e-10, atol=1e-12), (mine, want)


def _stabilised(x: torch.Tensor, la: torch.Tensor, li: torch.Tensor) -> torch.Tensor:
    """xLSTM's stabilised sum, the exp taken only where s <= t (never inf)."""
    c = la.cumsum(0)
    causal = torch.ones(len(x), len(x), dtype=torch.bool).tril()
    z = torch.where(causal, c[:, None] - c[None, :] + li[None, :], float("-inf"))
    shifted = torch.where(causal, z - z.amax(1, keepdim=True), 0)
    return (torch.where(causal, torch.exp(shifted), 0) * x[None, :]).sum(1)


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_a_stabilised_recurrence_has_a_finite_second_derivative_where_its_exp_overflows(
    scale: float, tmp_path: Path
) -> None:
    """The exp's adjoint in the double backward is a sum of terms gated by the causal mask,
    one gated again by the Max's argmax: no one mask, so it was multiplied by the exp (inf
    at s > t from gates of ~1e3 on) and the second derivatives in la and li were inf."""
    module, _ = _module("stabilised_gated_recurrence", tmp_path)
    gen = torch.Generator().manual_seed(0)
    x, la, li = (torch.randn(5, dtype=torch.float64, generator=gen) for _ in range(3))
    la, li = la * scale, li * scale
    g = torch.randn(5, dtype=torch.float64, generator=gen)
    v = [torch.randn(5, dtype=torch.float64, generator=gen) for _ in range(3)]

    def second(f) -> list:
        leaves = [t.clone().requires_grad_(True) for t in (x, la, li)]
        grads = torch.autograd.grad((f(*leaves) * g).sum(), leaves, create_graph=True)
        return torch.autograd.grad(sum((d * w).sum() for d, w in zip(grads, v)), leaves)

    for mine, want in zip(second(module.Function.apply), second(_stabilised)):
        assert torch.isfinite(mine).all(), mine
        assert torch.allclose(mine, want, rtol=1e-10, atol=1e-12), (mine, want)


def test_celu_at_a_small_alpha_has_a_finite_second_derivative(tmp_path: Path) -> None:
    """CELU at alpha = 1e-3: exp(x / alpha) is inf from x = 0.71 on, where minimum's step
    gates its adjoint to 0; the double backward read that adjoint beside the exp in a later
    statement and was nan there. Now it is exp(x / alpha) / alpha for x < 0 and 0 above, as
    written by hand (torch's celu's double backward agrees to 1e-7: it works from the output)."""
    module, _ = _module("celu_gated_adjoint", tmp_path)
    alpha = 1e-3
    x = torch.tensor([2.0, 800.0, 1e4, 0.5, 1e-4, -5e-4, -1e-2, -1.0, -800.0], dtype=torch.float64)
    w = torch.linspace(0.5, 1.5, len(x), dtype=torch.float64)
    mine = _second_derivative(lambda a: module.Function.apply(a, alpha=alpha), x, w)
    by_hand = w * w * torch.where(x < 0, torch.exp(x / alpha) / alpha, 0)
    torch_celu = _second_derivative(lambda a: torch.nn.functional.celu(a, alpha), x, w)
    assert torch.isfinite(mine).all(), mine
    assert torch.allclose(mine, by_hand, rtol=1e-12, atol=0), (mine, by_hand)
    assert torch.allclose(mine, torch_celu, rtol=1e-6, atol=0), (mine, torch_celu)


def test_elu_by_hand_has_a_finite_second_derivative_where_exp_overflows(tmp_path: Path) -> None:
    """ELU by where(): the double backward read exp(x)'s adjoint, gated in an earlier
    statement, beside exp(x) (inf from x = 710 on): nan there, where torch's elu's is 0."""
    module, _ = _module("elu_by_hand", tmp_path)
    x = torch.tensor([1e4, 800.0, 2.0, -1.0, -800.0], dtype=torch.float64)
    w = torch.linspace(0.5, 1.5, len(x), dtype=torch.float64)
    mine = _second_derivative(module.Function.apply, x, w)
    want = _second_derivative(torch.nn.functional.elu, x, w)
    assert torch.isfinite(mine).all(), mine
    assert torch.allclose(mine, want, rtol=1e-12, atol=0), (mine, want)


@pytest.mark.parametrize(
    ("logits", "dtype"),
    [([[20.0, 0.0, 0.0], [0.0, 1.0, 2.0]], torch.float32), ([[40.0, 0.0, 0.0]], torch.float64)],
)
def test_a_focal_loss_with_its_exponent_a_param_stays_finite(logits, dtype, tmp_path) -> None:
    """(1 - p)**gamma beside a divisor p - 1: merged, so a confident prediction (p rounding
    to 1) has the gradient torch's log_softmax form has (0 there), not 0 / 0."""
    module, _ = _module("focal_loss_gamma", tmp_path)
    x = torch.tensor(logits, dtype=dtype)
    y = torch.zeros(x.shape[0], dtype=torch.int64)
    out, saved = module.forward(x, y, gamma=2.5, alpha=0.25)
    dx, _ = module.backward(torch.ones((), dtype=dtype), saved)

    def reference(v):
        lp = torch.log_softmax(v, 1)[:, 0]
        return -0.25 * ((1 - lp.exp()) ** 2.5 * lp).mean()

    want, (want_dx,) = _reference_grad(reference, x)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert torch.isfinite(dx).all(), dx
    assert torch.allclose(out, want, rtol=tol, atol=1e-7) and torch.allclose(
        dx, want_dx, rtol=tol, atol=1e-7
    )


@pytest.mark.parametrize(
    ("row", "dtype"), [([250.0, 0.0, 0.0], torch.float32), ([1e4, -1e4, 0.0], torch.float64)]
)
def test_the_entropy_of_a_softmax_with_a_temperature_is_finite(row, dtype, tmp_path) -> None:
    """log(p) of softmax(x / tau) split for range though x / tau is undefined at tau = 0
    (identities._where_defined): the forward was 0 * log(0) = nan where torch's is 0."""
    module, _ = _module("softmax_entropy_with_a_temperature", tmp_path)
    x = torch.tensor([row], dtype=dtype)
    out, saved = module.forward(x, tau=2.0)
    (dx,) = module.backward(torch.ones_like(out), saved)

    def reference(v):
        lp = torch.log_softmax(v / 2.0, 1)
        return -(lp.exp() * lp).sum(1)

    want, (want_dx,) = _reference_grad(reference, x)
    assert torch.isfinite(out).all() and torch.isfinite(dx).all(), (out, dx)
    assert torch.allclose(out, want, atol=1e-6) and torch.allclose(dx, want_dx, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_log_cosh_loss_is_finite_where_cosh_overflows(dtype, tmp_path) -> None:
    """log(cosh(d)) at |d| of 100 (float32) and 1e3 (float64) was inf; the loss is |d| - log 2
    there, and the gradient tanh(d) / (N M) as it was (log_cosh_loss)."""
    module, _ = _module("log_cosh_loss", tmp_path)
    d = torch.tensor([[100.0, -1e3, 0.5, -3.0]], dtype=dtype)
    out, saved = module.forward(d, torch.zeros_like(d))
    dyhat, dy = module.backward(torch.ones_like(out), saved)
    wide = d.double()
    want = (wide.abs() + torch.nn.functional.softplus(-2 * wide.abs()) - math.log(2)).mean()
    tol = 1e-6 if dtype == torch.float32 else 1e-14
    assert torch.isfinite(out) and abs(float(out) - float(want)) <= tol * float(want), out
    torch.testing.assert_close(dyhat, torch.tanh(d) / d.numel(), rtol=tol, atol=0)
    torch.testing.assert_close(dy, -dyhat, rtol=0, atol=0)


def test_a_p_norm_at_zero_has_the_norms_gradient_zero(tmp_path: Path) -> None:
    """``Sum(|x|**p)**(1/p)`` at a zero row, p a 0-d input: x's gradient is vector_norm's (0
    there), p's is finite (0 at the zero row: the norm is 0 for every p), and the second
    order and the tangent are finite (p_norms_at_zero)."""
    module, _ = _module("p_norms_at_zero", tmp_path)
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.0]], dtype=torch.float64)
    leaves = [x.clone().requires_grad_(), torch.tensor(2.5, dtype=torch.float64).requires_grad_()]
    dx, dp = torch.autograd.grad(module.Function.apply(*leaves).sum(), leaves, create_graph=True)
    refs = [t.detach().clone().requires_grad_() for t in leaves]
    norm = torch.linalg.vector_norm
    want = norm(refs[0], ord=2.5, dim=1) + norm(refs[0], ord=3, dim=1)
    (want_dx,) = torch.autograd.grad(want.sum(), refs[0])
    torch.testing.assert_close(dx.detach(), want_dx, rtol=1e-12, atol=1e-12)
    h = 1e-6  # p's gradient: central differences of vector_norm's p-norm, the only term in p
    row = x[1]
    fd = (norm(row, ord=2.5 + h) - norm(row, ord=2.5 - h)) / (2 * h)
    assert torch.isfinite(dp) and abs(float(dp.detach()) - float(fd)) < 1e-7, (dp, fd)
    second = torch.autograd.grad((dx * dx).sum() + dp * dp, leaves)
    assert all(torch.isfinite(s).all() for s in second)
    _, tangent = torch.func.jvp(
        module.Function.apply,
        (x, leaves[1].detach()),
        (torch.ones_like(x), torch.tensor(1.0, dtype=x.dtype)),
    )
    assert torch.isfinite(tangent).all()


@pytest.mark.parametrize(
    ("row", "dtype"),
    [
        ([2000.0, 0.0, 0.0], torch.float64),
        ([0.0, 200.0, 0.0], torch.float32),
        ([30, 0, -800], torch.float64),
    ],
)
def test_a_softmax_of_a_scaled_exp_is_finite(row, dtype, tmp_path) -> None:
    """log(p) of ``exp((x - m) / T) / sum`` split for range, T a 0-d input: the entropy was
    0 * log(0) = nan and the cross-entropy log(0) = -inf where torch's are finite."""
    module, _ = _module("softmax_of_a_scaled_exp", tmp_path)
    x, temperature = torch.tensor([row], dtype=dtype), torch.tensor(1.5, dtype=dtype)
    t = torch.zeros(1, dtype=torch.int64)
    out, saved = module.forward(x, temperature, t)
    dx, dT, _ = module.backward(torch.ones_like(out), saved)

    def reference(v, temp):
        lp = torch.log_softmax(v / temp, 1)
        return -(lp.exp() * lp).sum(1) - lp[:, 0]

    want, (want_dx, want_dT) = _reference_grad(reference, x, temperature)
    assert all(torch.isfinite(v).all() for v in (out, dx, dT)), (out, dx, dT)
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    for got, ref in ((out, want), (dx, want_dx), (dT, want_dT)):
        assert torch.allclose(got, ref, rtol=tol, atol=tol), (got, ref)


def _sigmoid_focal(v: torch.Tensor, t: torch.Tensor, gamma: float, alpha: float | None):
    p = torch.sigmoid(v)
    ce = torch.nn.functional.binary_cross_entropy_with_logits(v, t, reduction="none")
    pt = p * t + (1 - p) * (1 - t)
    at = 1 if alpha is None else alpha * t + (1 - alpha) * (1 - t)
    return (at * ce * (1 - pt) ** gamma).mean()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("name", "params"),
    [("sigmoid_focal_loss", {}), ("sigmoid_focal_loss_gamma", {"gamma": 1.5, "alpha": 0.25})],
)
def test_a_sigmoid_focal_loss_is_finite_where_its_prediction_is_sure(
    name, params, dtype, tmp_path
) -> None:
    """p (1 - p) times ((1 - t) / (1 - p) - t / p) multiplied out, and (1 - pt)**gamma merged
    with its divisor pt - 1: 0 * inf kept apart where p rounds to 0 or 1 (torch's gradient is
    0 there, as it is in float64 at x = 20)."""
    module, _ = _module(name, tmp_path)
    x = torch.tensor([20.0, -800.0, 0.3, -20.0, 40.0, 1e4, -1e4, 2.0], dtype=dtype)
    t = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0], dtype=dtype)
    out, saved = module.forward(x, t, **params)
    dx, dt = module.backward(torch.ones((), dtype=dtype), saved)
    gamma = params.get("gamma", 2.0)
    want, (want_dx, want_dt) = _reference_grad(
        lambda v, u: _sigmoid_focal(v, u, gamma, params.get("alpha")), x, t
    )
    assert torch.isfinite(dx).all() and torch.isfinite(dt).all(), (dx, dt)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert torch.allclose(out, want, rtol=tol)
    assert torch.allclose(dx, want_dx, rtol=tol, atol=1e-12)
    assert torch.allclose(dt, want_dt, rtol=tol, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_sum_scaled_by_a_tensor_is_not_read_back_as_a_quotient(dtype, tmp_path) -> None:
    # out = tanh(Sum(y)) * Sum(y**2): the backward read Sum(y**2) back as out / tanh(Sum(y)),
    # 0 / 0 = NaN at every block whose entries sum to 0 (an ordinary input, not an extreme one;
    # found by the fourteenth session's accuracy sweep). A named reduction folds only where
    # dividing by its coefficient is safe (derive.symbolic.canon._divides_safely).
    module, _ = _module("view_by_a_param", tmp_path)
    x = torch.tensor([[1.0, -1.0, 0.5, 0.25], [0.0, 0.0, -2.0, 2.0]], dtype=dtype)

    def reference(x):
        y = x.view(2, 2, 2)
        return (y**2).sum(2) * torch.tanh(y.sum(2))

    leaf = x.clone().requires_grad_(True)
    out = module.Function.apply(leaf)
    (dx,) = torch.autograd.grad(out, leaf, torch.ones_like(out), create_graph=True)
    (hv,) = torch.autograd.grad(dx, leaf, torch.ones_like(dx))
    ref_leaf = x.clone().requires_grad_(True)
    want = reference(ref_leaf)
    (want_dx,) = torch.autograd.grad(want, ref_leaf, torch.ones_like(want), create_graph=True)
    (want_hv,) = torch.autograd.grad(want_dx, ref_leaf, torch.ones_like(want_dx))
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-6}
    assert torch.isfinite(dx).all() and torch.isfinite(hv).all()
    assert torch.allclose(out, want, **tol)
    assert torch.allclose(dx, want_dx, **tol)
    assert torch.allclose(hv, want_hv, **tol)


def test_the_gradient_of_a_zero_scale_of_a_sum_is_finite(tmp_path: Path) -> None:
    # h[g, y] = Sum_f (W[g, f]**2 + 2) exp(x[f, y]) * t_W[g]: dt_W was Sum_y g h / t_W, NaN at
    # t_W = 0 (a zero-initialised gain), where it is Sum_y g Sum_f (W**2 + 2) exp(x)
    module, _ = _module("inputs_named_like_temporaries", tmp_path)
    torch.manual_seed(0)
    x, w = torch.randn(3, 2, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    t_w = torch.tensor([0.0, 1.5, 0.0, -0.5], dtype=torch.float64)
    sum_x = torch.randn(3, dtype=torch.float64)
    out, saved = module.forward(x, w, t_w, sum_x)
    grads = module.backward(torch.ones_like(out), saved)

    def reference(x, w, t_w, sum_x):
        h = ((w**2 + 2)[:, :, None] * torch.exp(x)[None]).sum(1) * t_w[:, None]
        return h + (x * sum_x[:, None]).sum(0) + x.sum(0)

    want, want_grads = _reference_grad(reference, x, w, t_w, sum_x)
    assert torch.allclose(out, want, rtol=1e-12)
    for got, expected in zip(grads, want_grads, strict=True):
        assert torch.isfinite(got).all()
        assert torch.allclose(got, expected, rtol=1e-12, atol=1e-15)


def test_a_sum_scaled_by_its_max_has_a_finite_gradient_at_a_zero_max(tmp_path: Path) -> None:
    # out = m Sum_s exp(W - m), m = max_s W: the backward read the sum back as out / m, and
    # (1/m - 1) out was inf * 0 = NaN wherever the maximum is exactly 0 (x = 0 here)
    module, _ = _module("max_shifted_exp_times_its_max", tmp_path)
    x = torch.tensor([0.0, -1.0], dtype=torch.float64)
    p = torch.tensor([[0.3, -0.2], [0.1, 0.5]], dtype=torch.float64)

    def reference(x, p):
        w = x[:, None] * torch.exp(p)
        m = w.amax(0)
        return m * torch.exp(w - m).sum(0)

    out, saved = module.forward(x, p)
    dx, dp = module.backward(torch.ones_like(out), saved)
    want, (want_dx, want_dp) = _reference_grad(reference, x, p)
    assert torch.isfinite(dx).all() and torch.isfinite(dp).all()
    assert torch.allclose(out, want, rtol=1e-12)
    assert torch.allclose(dx, want_dx, rtol=1e-12) and torch.allclose(dp, want_dp, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_one_plus_and_exp_minus_one_are_computed_as_log1p_and_expm1(dtype, tmp_path) -> None:
    # log(1 + x**2) at x = 1e-3 rounds 1 + 1e-6 (float32: ~5% off); e^x - 1 and
    # log(1 - e^-y) at 1e-5 cancel likewise. Each term is tested alone, against float64's
    # log1p and expm1 on the same values, to a few ulps of the dtype
    module, _ = _module("log1p_and_expm1_by_hand", tmp_path)
    small = torch.tensor([1e-3, -2e-5, 3e-4, 0.5], dtype=dtype)
    large = torch.full_like(small, 30.0)  # log(1 - e^-30) is -9e-14: below every term's ulp
    eps = torch.finfo(dtype).eps

    def close(got, want):
        return torch.allclose(got.double(), want, rtol=8 * eps, atol=0)

    wide = small.double()
    out, _ = module.forward(small, large)  # log(1 + x**2) + expm1(x), the y term ~ 1e-13
    # log(1 - e^-30) as log1p(-e^-30): log(-expm1(-30)) keeps only ~3 digits of it
    want = torch.log1p(wide**2) + torch.expm1(wide) + torch.log1p(-torch.exp(-large.double()))
    assert close(out, want), (out, want)
    # the y term alone (x = 0 zeroes the other two), down to y = 1e-30, where 1 - e^-y is 0
    # and the forward log(-expm1(-y)) is -69: its gradient 1 / expm1(y) is 1e30, finite
    y = torch.cat([small.abs(), torch.tensor([1e-30], dtype=dtype)])
    out_y, saved = module.forward(torch.zeros_like(y), y)
    wide_y = y.double()
    assert close(
        out_y,
        torch.where(
            wide_y < 0.69, torch.log(-torch.expm1(-wide_y)), torch.log1p(-torch.exp(-wide_y))
        ),
    ), out_y
    dx, dy = module.backward(torch.ones_like(out_y), saved)
    assert torch.isfinite(dx).all() and close(dy, 1 / torch.expm1(y.double())), dy


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_celu_by_hand_has_torch_s_gradient_next_to_its_kink(dtype, tmp_path) -> None:
    # minimum(0, alpha (e^(x/alpha) - 1)) differentiates to a step of alpha (1 - e^(x/alpha)),
    # which rounded to 0 at |x| < 6e-8 (float32): a tie, half of each side, a gradient of 0.5
    # or 1.5 where torch's F.celu's is 1. The kink test is computed with expm1 now.
    module, _ = _module("celu_gated_adjoint", tmp_path)
    x = torch.tensor([-1e-9, -1e-20, 0.0, 1e-20, 1e-9, -2.0, 2.0], dtype=dtype)
    leaf = x.clone().requires_grad_(True)
    (mine,) = torch.autograd.grad(module.Function.apply(leaf, alpha=1.0).sum(), leaf)
    ref = x.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(torch.nn.functional.celu(ref, 1.0).sum(), ref)
    assert torch.allclose(mine, want, rtol=4 * torch.finfo(dtype).eps, atol=0), (mine, want)


_NORM = torch.linalg.vector_norm
# each case of tests/cases as torch.linalg.vector_norm writes it, rows of x and y
NORMS = {
    "norms_at_zero": lambda x, y: _NORM(x, dim=1) + _NORM(x - y, dim=1) + _NORM(y, dim=1) / 2**0.5,
    "norms_through_definitions": lambda x, y: (
        _NORM(x, dim=1) * (1 + 1 / 2**0.5) + _NORM(x - y, dim=1)
    ),
}


@pytest.mark.parametrize("case", sorted(NORMS))
def test_a_norm_at_zero_has_the_norms_gradient_zero(case: str, tmp_path: Path) -> None:
    """``sqrt(Sum(x**2))`` at a zero row: x / sqrt(S) was 0 / 0 = NaN where the forward is 0
    (found by probing). The root's partial is 0 where its sum of squares is, as
    torch.linalg.vector_norm's backward takes it; the second order and the tangent are
    finite there too (vector_norm's own second order is NaN). The sum may be a definition of
    its own, read by name (norms_through_definitions)."""
    module, _ = imported(Path(__file__).parents[1] / "cases" / f"{case}.py", tmp_path)
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, -2.0]], dtype=torch.float64)
    y = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.5, 0.5]], dtype=torch.float64)
    leaves = [x.clone().requires_grad_(), y.clone().requires_grad_()]
    out = module.Function.apply(*leaves)
    mine = torch.autograd.grad(out.sum(), leaves, create_graph=True)
    refs = [t.clone().requires_grad_() for t in (x, y)]
    want = NORMS[case](*refs)
    theirs = torch.autograd.grad(want.sum(), refs)
    for got, ref in zip(mine, theirs, strict=True):
        torch.testing.assert_close(got.detach(), ref, rtol=1e-12, atol=1e-12)
    second = torch.autograd.grad(sum((g * g).sum() for g in mine), leaves)
    assert all(torch.isfinite(s).all() for s in second)
    _, tangent = torch.func.jvp(module.Function.apply, (x, y), (torch.ones_like(x), y))
    assert torch.isfinite(tangent).all()


def test_a_max_shifted_exp_under_its_mask_reads_the_forwards_exp(tmp_path: Path) -> None:
    # fuzz --range 1210288, shrunk: under where(t <= f, .., 0) the simplifier reads the masked
    # hid as its product, so x = exp(hid - z) was recomputed there as exp(logits^2 y - z), one
    # torch.addcmul: at logits^2 y ~ 4e22 its rounding differs from the forward's by an ulp
    # (8e6) at the Max, where the forward's hid - z is exactly 0, and exp overflowed (dy inf
    # and NaN where autograd's is finite). Folded under its condition, it reads the saved x.
    module, _ = _module("max_shifted_exp_under_its_mask", tmp_path)
    d = derive(parse(load_op(CASES / "max_shifted_exp_under_its_mask.py")))
    assert "x" in d.saved and "z" not in d.saved
    torch.manual_seed(0)
    y = 300.0 * (2 * torch.rand(3, 4, 5, dtype=torch.float64) - 1)
    y[0, 0, 4] = -23.0  # logits[0] = 1/sigmoid(-23) ~ 1e10: hid ~ 1e20 y at t = 0
    tgt, pos = torch.tensor([0, 1, 2]), torch.tensor([4, 0, 1])
    grad_out = torch.randn(3, 4, 5, dtype=torch.float64)
    out, saved = module.forward(y, tgt, pos)
    dy, _, _ = module.backward(grad_out, saved)

    def reference(y):
        logits = 1 / torch.sigmoid(y[torch.arange(3), tgt, pos])
        causal = (torch.arange(3)[:, None] <= torch.arange(5))[:, None, :]
        hid = torch.where(causal, (logits * logits)[:, None, None] * y, -math.inf)
        return torch.exp(hid - hid.amax(0))

    leaf = y.clone().requires_grad_(True)
    want = reference(leaf)
    (want_dy,) = torch.autograd.grad(want, leaf, grad_out)
    assert torch.isfinite(out).all() and torch.isfinite(want_dy).all()
    assert torch.isfinite(dy).all()
    assert torch.allclose(out, want.detach(), rtol=1e-12)
    assert torch.allclose(dy, want_dy, rtol=1e-10, atol=0)


# not a tests/cases file: at the random keep the case checks draw, the gradient in keep is
# 1e30 times a rounded difference, as ill-conditioned in autograd as in the generated code
HUGE_MASK_OP = """from derive import Op

OP = Op(
    name="attention_under_a_huge_additive_mask",
    inputs=["x[N, T, T]", "keep[N, T]", "v[N, T, D]"],
    definitions=[
        "s[n, t, u] = x[n, t, u] - (1 - keep[n, u]) * 1e30",
        "m[n, t] = Max(s[n, t, u], u)",
        "e[n, t, u] = exp(s[n, t, u] - m[n, t])",
        "out[n, t, d] = Sum(e[n, t, u] * v[n, u, d], u) / Sum(e[n, t, u2], u2)",
    ],
)
"""


def _keep(*shape: int) -> torch.Tensor:
    keep = (torch.rand(*shape) < 0.6).double()
    keep[..., 0] = 1.0  # a kept entry in every row
    return keep


@pytest.mark.parametrize(
    ("case", "draw", "reference"),
    [
        (
            "softmax_under_an_additive_mask",
            lambda: (torch.randn(4, 6, dtype=torch.float64), _keep(4, 6), torch.randn(4, 6)),
            lambda x, keep, w: (torch.softmax(x + (1 - keep) * -10000.0, 1) * w).sum(1),
        ),
        (
            "logsumexp_of_a_float_offset",
            lambda: (torch.randn(4, 6, dtype=torch.float64),),
            lambda x: torch.logsumexp(x + 1000.5, 1),
        ),
        (
            "attention_under_a_huge_additive_mask",
            lambda: (torch.randn(2, 5, 5, dtype=torch.float64), _keep(2, 5), torch.randn(2, 5, 3)),
            lambda x, keep, v: torch.softmax(x - (1 - keep[:, None, :]) * 1e30, 2) @ v,
        ),
    ],
)
def test_a_decimal_constant_stays_in_the_exponent_it_is_written_in(
    case: str, draw, reference, tmp_path: Path
) -> None:
    # found by probing: SymPy takes a term of an exponent out of its exp as a factor once its
    # exp is a number, as a Float's is: BERT's mask made exp(s - m) 1e-4343 exp(x + 10000 keep
    # - m), 0 * inf in the backward, and x + 1000.5 made it 3.2e434 exp(x - m), inf * 0: NaN
    # gradients at unit-scale inputs. And SymPy multiplies a number into a sum, x - 1e30 +
    # 1e30 keep, which added in that order lost x in 1e30's rounding (the forward 0.66 off)
    if (CASES / f"{case}.py").exists():
        module, _ = _module(case, tmp_path)
    else:
        (tmp_path / "ops").mkdir()
        (tmp_path / "ops" / f"{case}.py").write_text(HUGE_MASK_OP)
        module, _ = imported(tmp_path / "ops" / f"{case}.py", tmp_path)
    torch.manual_seed(0)
    inputs = [t.double() for t in draw()]
    out, saved = module.forward(*inputs)
    grad_out = torch.randn_like(out)
    grads = module.backward(grad_out, saved)
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    want = reference(*leaves)
    wanted = torch.autograd.grad(want, leaves, grad_out)
    assert torch.allclose(out, want.detach(), rtol=1e-12, atol=1e-12)
    for got, expected in zip(grads, wanted, strict=True):
        assert torch.isfinite(got).all()
        assert torch.allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_a_log_of_a_log_sigmoid_has_its_gradient_where_the_sigmoid_rounds_to_1(
    tmp_path: Path,
) -> None:
    # d log(-log s) = -(1 - s) / softplus(-x): 1 - s as written was 0.1% off at x = 30 and 0
    # past 37, where the gradient is -1 (F.logsigmoid's backward is exact there)
    module, _ = _module("log_of_a_log_sigmoid", tmp_path)
    d = derive(parse(load_op(CASES / "log_of_a_log_sigmoid.py")))
    assert "sigmoid(-x[n])" in str(d.final["x"])
    x = torch.tensor([-800.0, -40.0, -1.0, 0.0, 5.0, 30.0, 37.0, 40.0, 100.0, 700.0]).double()
    loss, saved = module.forward(x)
    (dx,) = module.backward(torch.tensor(1.0, dtype=torch.float64), saved)
    want, (want_dx,) = _reference_grad(
        lambda x: torch.log(-torch.nn.functional.logsigmoid(x)).sum(), x
    )
    assert torch.allclose(loss, want, rtol=1e-14)
    assert torch.allclose(dx, want_dx, rtol=1e-13, atol=0)


@pytest.mark.parametrize("scale", [800.0, 1e4, 1e10])
def test_a_log_softmax_in_one_line_adds_its_shift_first(scale: float, tmp_path: Path) -> None:
    # x - m - log(S) added as x - log(S) - m rounds at x's magnitude: 1e-6 off at 1e10
    module, _ = _module("log_softmax_in_one_line", tmp_path)
    x = torch.tensor([[0.0, 0.0, -1.0], [0.5, -2.0, 0.25]], dtype=torch.float64) + scale
    lp, saved = module.forward(x)
    grad_out = torch.tensor([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0]], dtype=torch.float64)
    (dx,) = module.backward(grad_out, saved)
    want, (want_dx,) = _reference_grad(lambda x: torch.log_softmax(x, 1) * grad_out, x)
    assert torch.allclose(lp, torch.log_softmax(x, 1), rtol=4e-16, atol=0)
    assert torch.allclose(dx, want_dx, rtol=1e-14, atol=1e-15)


def test_the_catalogue_log_softmax_double_backward_adds_its_shift_first(tmp_path: Path) -> None:
    # its double backward computed the output again as x - log(S) - m: a Hessian-vector
    # product at logits of 1e10 was 1e-6 off (found by probing)
    module, _ = imported(Path(__file__).resolve().parents[2] / "ops" / "log_softmax.py", tmp_path)
    x = torch.tensor([[1e10, 1e10, 1e10 - 1]], dtype=torch.float64)
    w, v = torch.tensor([[1.0, 0.0, 0.0]]).double(), torch.tensor([[1.0, 2.0, 3.0]]).double()

    def hvp(f):
        leaf = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad((f(leaf) * w).sum(), leaf, create_graph=True)
        return torch.autograd.grad((g * v).sum(), leaf)[0]

    want = hvp(lambda a: torch.log_softmax(a, 1))
    assert torch.allclose(hvp(module.Function.apply), want, rtol=1e-14, atol=0)


def test_sums_are_added_in_the_order_the_text_adds_them(tmp_path: Path) -> None:
    # expm1(y - x) - (y - x) was (expm1(d) + x) - y to SymPy: 0 where it is 5e-19, and
    # a - b + eps lost eps where a and b are 1e10
    module, _ = _module("sums_added_as_written", tmp_path)
    x = torch.tensor([-2.0, -5.0], dtype=torch.float64)
    y = x + torch.tensor([1e-9, -3e-9], dtype=torch.float64)
    a = torch.full((2,), 1e10, dtype=torch.float64)
    out, _ = module.forward(x, y, a, a.clone(), eps=1e-6)
    d = y - x
    assert torch.equal(out, (torch.expm1(d) - d) * 1e-6)


def test_an_additive_mask_after_a_written_sum_keeps_the_sum(tmp_path: Path) -> None:
    # x + y + (1 - keep) * -1e30: the written x + y was added first, then the mask's terms one
    # by one (printed x + y + keep * 1e30 - 1e30: x + y lost) where keep = 1, at unit scale
    path = tmp_path / "mask_after_a_sum.py"
    path.write_text(
        'from derive import Op\nOP = Op(name="mask_after_a_sum", inputs=["x[N]", "y[N]", '
        '"keep[N]"], definitions=["out[n] = x[n] + y[n] + (1 - keep[n]) * -1e30"])\n'
    )
    module, _ = imported(path, tmp_path)
    x, y = torch.tensor([0.5, 1.25, -2.0]).double(), torch.tensor([0.25, -1.0, 3.0]).double()
    keep = torch.tensor([1.0, 1.0, 0.0]).double()
    out, _ = module.forward(x, y, keep)
    assert torch.equal(out, x + y + (1 - keep) * -1e30)


def test_grouped_sums_are_added_as_written_in_forward_tangent_and_backward(
    tmp_path: Path,
) -> None:
    module, _ = _module("grouped_sums", tmp_path)
    k = torch.tensor([1.0, 3.0, -5.0]).double() * 2.0**-19
    a, c = torch.full((3,), 1e10).double(), torch.full((3,), 3e10).double()
    b, d = a + k, c - k
    args = [t.clone().requires_grad_(True) for t in (a, b, c, d)]

    def written(a, b, c, d):
        pairs, scaled = (a - b) + (c - d), 3 * (a - b) + c
        return pairs * scaled + torch.log(a - b + 1e-6 + 1)

    out = module.Function.apply(*args, eps=1e-6)
    want = written(*args)
    assert torch.equal(out.detach(), want.detach())
    grads = torch.autograd.grad(out.sum(), args)
    want_grads = torch.autograd.grad(want.sum(), args)
    for got, ref in zip(grads, want_grads, strict=True):
        assert torch.allclose(got, ref, rtol=1e-12, atol=0)
    tangents = tuple(torch.ones(3).double() for _ in args)
    _, t_out = torch.func.jvp(
        lambda *z: module.Function.apply(*z, eps=1e-6), (a, b, c, d), tangents
    )
    _, t_want = torch.func.jvp(written, (a, b, c, d), tangents)
    assert torch.allclose(t_out, t_want, rtol=1e-12, atol=0)


def test_a_stepwise_log_of_a_log_sigmoid_has_its_gradient_where_the_sigmoid_rounds_to_1(
    tmp_path: Path,
) -> None:
    module, _ = _module("stepwise_log_of_a_log_sigmoid", tmp_path)
    x = torch.tensor([-40.0, 0.0, 20.0, 30.0, 37.5, 40.0, 100.0]).double().requires_grad_(True)
    y = torch.ones(7).double()
    (dx,) = torch.autograd.grad(module.Function.apply(x, y).sum(), x)
    (want,) = torch.autograd.grad(torch.log(-torch.nn.functional.logsigmoid(x)).sum(), x)
    assert torch.allclose(dx, want, rtol=1e-13, atol=0)


def test_a_stepwise_second_order_reads_each_terms_complement_as_a_sigmoid(
    tmp_path: Path,
) -> None:
    module, _ = _module("stepwise_root_of_a_log_sigmoid", tmp_path)
    x = torch.tensor([-5.0, 0.0, 20.0, 30.0, 36.0, 40.0]).double().requires_grad_(True)
    (g,) = torch.autograd.grad(
        module.Function.apply(x, torch.ones(6).double()).sum(), x, create_graph=True
    )
    (h,) = torch.autograd.grad(g.sum(), x)
    # f = sqrt(L), L = softplus(-x): f'' = s(-x) (s(x) - s(-x) / (2 L)) / (2 sqrt(L))
    s_neg, s_pos = torch.sigmoid(-x.detach()), torch.sigmoid(x.detach())
    big_l = torch.nn.functional.softplus(-x.detach(), threshold=50)
    want = s_neg * (s_pos - s_neg / (2 * big_l)) / (2 * big_l.sqrt())
    assert torch.allclose(h, want, rtol=1e-13, atol=0)


LOG_MASKED = {
    "softmax_under_a_log_mask": lambda x, keep: torch.softmax(x + keep.log(), 1),
    "log_mask_inside_the_exp": lambda x, keep, v: torch.softmax(x + keep.log(), 1) @ v,
}


@pytest.mark.parametrize("case", sorted(LOG_MASKED))
def test_a_log_mask_stays_in_its_exp_in_every_order(case: str, tmp_path: Path) -> None:
    # found by probing: SymPy takes exp(log(keep)) = keep out of the exp, so exp(x +
    # log(keep) - m) was keep exp(x - m): 0 * inf = nan at a masked logit of 1e4 (the forward
    # too where the log was written inside the exp), and u * inf for a tiny u
    module, _ = _module(case, tmp_path)
    reference = LOG_MASKED[case]
    x = torch.tensor([[1e4, 0.0, 1.0, 3.0], [-1e4, 2.0, 1e4, 5.0]], dtype=torch.float64)
    keep = torch.tensor([[0.0, 1.0, 1.0, 1e-300], [1.0, 1.0, 0.0, 0.5]], dtype=torch.float64)
    rest = (torch.randn(4, 3, dtype=torch.float64),) if case.startswith("log_mask") else ()
    mine = lambda x: module.Function.apply(x, keep, *rest)  # noqa: E731
    want = lambda x: reference(x, keep, *rest)  # noqa: E731
    w = torch.randn_like(want(x))
    assert torch.allclose(mine(x), want(x), rtol=1e-13, atol=1e-300)
    t = torch.randn_like(x)
    for got, expected in [
        (
            torch.func.grad(lambda x: (mine(x) * w).sum())(x),
            torch.func.grad(lambda x: (want(x) * w).sum())(x),
        ),
        (torch.func.jvp(mine, (x,), (t,))[1], torch.func.jvp(want, (x,), (t,))[1]),
        (
            torch.func.hessian(lambda x: (mine(x) * w).sum())(x),
            torch.func.hessian(lambda x: (want(x) * w).sum())(x),
        ),
    ]:
        assert torch.isfinite(got).all()
        assert torch.allclose(got, expected, rtol=1e-12, atol=1e-14)


def test_an_exp_of_a_logged_tiny_factor_is_the_exp_of_the_sum(tmp_path: Path) -> None:
    # exp(x + log(y)) as y exp(x) was inf at (800, 1e-300) and 0 at (-800, 1e300)
    module = _written(
        tmp_path, "exp_of_a_log", ["x[N]", "y[N]"], ["out[n] = exp(x[n] + log(y[n]))"]
    )
    x = torch.tensor([800.0, -800.0, 1.0], dtype=torch.float64).requires_grad_(True)
    y = torch.tensor([1e-300, 1e300, 0.5], dtype=torch.float64)
    out = module.Function.apply(x, y)
    (dx,) = torch.autograd.grad(out.sum(), x)
    want = torch.exp(x.detach() + y.log())
    assert torch.allclose(out, want, rtol=1e-14, atol=0)
    assert torch.allclose(dx, want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("at", [1.001, 1 + 1e-6, 1 + 1e-8, 3.0])
def test_a_quotient_near_its_pole_keeps_its_digits(at: float, tmp_path: Path) -> None:
    # found by probing: SymPy's cancel multiplied out (x - 1)**2 in x / (x - 1)'s derivative,
    # -g / (x**2 - 2 x + 1): 9e-5 off at 1 + 1e-6, -inf at 1 + 1e-8; torch's is exact
    module, _ = _module("quotients_near_their_poles", tmp_path)
    x = torch.tensor([at, -at], dtype=torch.float64).requires_grad_(True)
    y = torch.tensor([-(2 - at), 2 - at], dtype=torch.float64).requires_grad_(True)

    def written(x, y):
        return x / (x - 1) + (y - 1) / (y + 1) + y / (1 + y * y)

    for f in (module.Function.apply, written):
        dx, dy = torch.autograd.grad(f(x, y).sum(), (x, y), create_graph=True)
        second = torch.autograd.grad((dx + dy).sum(), (x, y))
        if f is written:
            want = (dx, dy, *second)
        else:
            got = (dx, dy, *second)
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g, w, rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    "body, second",
    [
        ("where(x[n] > 0, log(x[n]), 0)", lambda x: -1 / (x * x)),
        ("where(x[n] > 0, sqrt(x[n]), 0)", lambda x: -0.25 * x**-1.5),
        ("where(x[n] != 0, 1 / x[n], 0)", lambda x: 2 / x**3),
        # found by probing (twenty-sixth session): the backward of x log(x) holds
        # where(x > 0, x, 0) / x, whose derivative was 0 / 0 at x = 0 (simplify.gate_divided)
        ("where(x[n] > 0, x[n] * log(x[n]), 0)", lambda x: 1 / x),
        ("where(x[n] > 0, log(x[n])**2, 0)", lambda x: (2 - 2 * torch.log(x)) / (x * x)),
    ],
)
def test_a_guarded_branch_keeps_its_guard_in_the_second_order(body, second, tmp_path) -> None:
    # found by probing: the double backward read the first backward's saved gradient,
    # b_dx = where(x > 0, g / x, 0), as -b_dx / x * v: 0 / 0 = nan at x = 0, where the
    # selected branch is the constant 0 (torch's own double backward is nan there too)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "guarded.py").write_text(
        f'from derive import Op\n\nOP = Op(name="guarded", inputs=["x[N]"], '
        f'definitions=["out[n] = {body}"])\n'
    )
    module, _ = imported(tmp_path / "ops" / "guarded.py", tmp_path)
    x = torch.tensor([0.0, -1.0, 2.0, 1e-3], dtype=torch.float64)
    h = torch.func.hessian(lambda x: module.Function.apply(x).sum())(x).diag()
    selected = (x > 0) if ">" in body else (x != 0)
    want = torch.where(selected, second(torch.where(selected, x, 1.0)), 0.0)
    assert torch.isfinite(h).all()
    assert torch.allclose(h, want, rtol=1e-13, atol=0)


@pytest.mark.parametrize(
    "inputs, definition, reference",
    [
        (
            ["x[N]", "w[N]"],
            "loss = Sum(w[n] * where(x[n] > 0, log(x[n]), 0), n)",
            lambda x, w: (w * torch.where(x > 0, _safe_log(x), 0)).sum(),
        ),
        (  # KL divergence to a target with zeros, the Hessian in the target
            ["x[N]", "w[N]"],
            "loss = Sum(where(x[n] > 0, x[n] * (log(x[n]) - w[n]), 0), n)",
            lambda x, w: torch.where(x > 0, x * (_safe_log(x) - w), 0).sum(),
        ),
        (  # x**0.5 beside the adjoint's gate: nan * 0 at x < 0 (arithmetic._off_domain)
            ["x[N]", "w[N]"],
            "loss = Sum(w[n] * where(x[n] > 0, x[n]**1.5, 0), n)",
            lambda x, w: (w * torch.where(x > 0, torch.where(x > 0, x, 1.0) ** 1.5, 0)).sum(),
        ),
    ],
)
def test_a_guarded_branch_beside_another_input_keeps_its_guard_in_the_second_order(
    inputs, definition, reference, tmp_path
) -> None:
    # found by probing: the second order of w where(x > 0, log(x), 0) is
    # (dout_log0 - b_dx v) / x, a sum each of whose terms is 0 at x <= 0 (the adjoint's
    # gate, the first gradient's saved mask): 0 / 0 = nan at x = 0 where the Hessian is 0
    module = _written(tmp_path, "guarded_sum", inputs, [definition])
    x = torch.tensor([0.0, -1.0, 2.0, 1e-3], dtype=torch.float64)
    w = torch.tensor([1.5, -2.0, 3.0, 0.25], dtype=torch.float64)
    got = torch.func.hessian(module.Function.apply, argnums=(0, 1))(x, w)
    want = torch.func.hessian(reference, argnums=(0, 1))(x, w)
    for g_row, w_row in zip(got, want, strict=True):
        for g, r in zip(g_row, w_row, strict=True):
            assert torch.isfinite(g).all()
            assert torch.allclose(g, r, rtol=1e-12, atol=1e-300)


F64 = torch.float64
_X8 = torch.tensor([[800.0, 1.0, 2.0, 700.0], [-5.0, 0.5, 3.0, 10.0]], dtype=F64)


def _safe_log(k: torch.Tensor) -> torch.Tensor:
    return torch.where(k > 0, k, 1.0).log()


@pytest.mark.parametrize(
    "inputs, definitions, draw, reference",
    [
        (  # the guard is SymPy's to merge: both branches are k exp(x) to it
            ["x[N, C]", "k[N, C]"],
            ["out[n, c] = where(k[n, c] > 0, exp(x[n, c] + log(k[n, c])), k[n, c] * exp(x[n, c]))"],
            lambda: [torch.randn(3, 4, dtype=F64), torch.randn(3, 4, dtype=F64)],
            lambda x, k: torch.where(k > 0, torch.exp(x + _safe_log(k)), k * torch.exp(x)),
        ),
        (  # k logged under a guard, and multiplied by another exp where it is negative
            ["x[N, C]", "y[N, C]", "k[N, C]"],
            [
                "out[n, c] = where(k[n, c] > 0, exp(x[n, c] + log(k[n, c])), 0) "
                "+ k[n, c] * exp(y[n, c])"
            ],
            lambda: [torch.randn(3, 4, dtype=F64) for _ in range(3)],
            lambda x, y, k: torch.where(k > 0, torch.exp(x + _safe_log(k)), 0) + k * torch.exp(y),
        ),
        (  # a definition that is only the log
            ["x[N, C]", "keep[N, C]"],
            [
                "s[n, c] = log(keep[n, c])",
                "m[n] = Max(x[n, c] + s[n, c], c)",
                "p[n, c] = exp(x[n, c] + s[n, c] - m[n]) / Sum(exp(x[n, k] + s[n, k] - m[n]), k)",
            ],
            lambda: [
                torch.tensor([[1e4, 0.0, 1.0, 3.0], [-1e4, 2.0, 1e4, 5.0]], dtype=F64),
                torch.tensor([[0.0, 1.0, 1.0, 1e-300], [1.0, 1.0, 0.0, 0.5]], dtype=F64),
            ],
            lambda x, keep: torch.softmax(x + keep.log(), 1),
        ),
        (  # the log of a product: SymPy takes out u v, a factor at a time here
            ["x[N, C]", "u[N, C]", "v[N, C]"],
            ["out[n, c] = exp(x[n, c] + log(u[n, c] * v[n, c]))"],
            lambda: [
                _X8,
                torch.tensor([[0.0, 1.0, 2.0, 0.5], [1.0, 2.0, 0.0, 3.0]], dtype=F64),
                torch.tensor([[1.0, 0.0, 3.0, 1e-300], [0.5, 1.0, 1.0, 2.0]], dtype=F64),
            ],
            lambda x, u, v: torch.exp(x + torch.log(u * v)),
        ),
        (  # the log of a call the saving would lift into a name of its own
            ["x[N, C]", "z[N, C]"],
            ["out[n, c] = exp(x[n, c] + log(sigmoid(z[n, c])))"],
            lambda: [_X8, torch.tensor([[-800.0, 0.0, 3.0, -30.0], [1.0, -2.0, 5.0, 0.0]])],
            lambda x, z: torch.exp(x + torch.nn.functional.logsigmoid(z)),
        ),
    ],
)
def test_a_logged_factor_goes_back_in_its_exp_with_its_sign(
    inputs, definitions, draw, reference, tmp_path: Path
) -> None:
    # found probing the log rule: a factor logged under a guard, or in a branch SymPy merged,
    # is negative where the other branch is taken, and exp(a + log(k)) was NaN there; and
    # three forms the rule first missed (NaN at a masked logit; inf at exp(800) times 0)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "logged.py").write_text(
        f"from derive import Op\n\nOP = Op(name='logged', inputs={inputs!r}, "
        f"definitions={definitions!r})\n"
    )
    module, _ = imported(tmp_path / "ops" / "logged.py", tmp_path)
    torch.manual_seed(0)
    args = [t.double() for t in draw()]
    leaves = [t.clone().requires_grad_(True) for t in args]
    out = module.Function.apply(*leaves)
    w = torch.randn_like(out)
    (grad,) = torch.autograd.grad((out * w).sum(), leaves[:1])
    refs = [t.clone().requires_grad_(True) for t in args]
    want = reference(*refs)
    (wanted,) = torch.autograd.grad((want * w).sum(), refs[:1])
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-300)
    assert torch.allclose(grad, wanted, rtol=1e-12, atol=1e-300)


def test_every_exp_ratio_of_a_product_is_read_as_a_sigmoid(tmp_path: Path) -> None:
    # found by probing: exp(x) exp(y) / B**2 took one sigmoid and left exp(y) / B, NaN at
    # y = 800 (the forward 0) and the Hessian in y 3x off at x = y = 400 (0.144 for 0.048)
    pair = ["out = Sum(2*exp(x[n]) / (2*exp(x[n]) + 3*exp(y[n])), n)"]
    module = _written(tmp_path, "weighted_pair", ["x[N]", "y[N]"], pair)
    at = [(0.0, 800.0), (400.0, 400.0), (-800.0, 0.0), (1.0, -2.0), (30.0, 0.0)]
    x = torch.tensor([a for a, _ in at], dtype=torch.float64).requires_grad_(True)
    y = torch.tensor([b for _, b in at], dtype=torch.float64).requires_grad_(True)

    out = module.Function.apply(x, y)
    dx, dy = torch.autograd.grad(out, (x, y), create_graph=True)
    hx = torch.autograd.grad(dx.sum(), (x, y), retain_graph=True)
    hy = torch.autograd.grad(dy.sum(), (x, y))
    # the same function is sigmoid(u), u = x - y + log(2/3): s' = s(u) s(-u), exact for any u,
    # and s'' = s' (s(-u) - s(u)); 1 - s beside s stays (GRAD_ATOL: 3e-17 off at u = 30)
    u = x.detach() - y.detach() + math.log(2 / 3)
    first = torch.sigmoid(u) * torch.sigmoid(-u)
    second = first * (torch.sigmoid(-u) - torch.sigmoid(u))
    want = (first, -first, second, -second, -second, second)
    for got, w in zip((dx, dy, *hx, *hy), want, strict=True):
        assert torch.isfinite(got).all()
        assert torch.allclose(got, w, rtol=1e-12, atol=GRAD_ATOL)


def test_a_log_sum_exp_over_every_index_is_shifted_by_a_0d_max(tmp_path: Path) -> None:
    # found by probing: the shift's Max over every index was refused as "a Max over every
    # index inside an expression", a Max the text never wrote; lifted, it is a 0-d definition
    module = _written(tmp_path, "lse_all", ["x[N, M]"], ["h = log(Sum(exp(x[n, m]), n, m))"])
    x = torch.tensor([[1e4, -1e4], [3.0, 1e4 - 1]], dtype=torch.float64).requires_grad_(True)
    (dx,) = torch.autograd.grad(module.Function.apply(x), x)
    # the gradient is the softmax: torch.logsumexp's exp(x - lse) carries the ulp of lse = 1e4
    want, want_dx = torch.logsumexp(x.detach().flatten(), 0), torch.softmax(x.detach().flatten(), 0)
    assert torch.allclose(module.Function.apply(x), want, rtol=1e-14, atol=0)
    assert torch.allclose(dx, want_dx.view_as(x), rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("gamma", [0.5, 1.5])
def test_a_focal_exponent_below_one_stays_finite_where_the_prediction_is_sure(
    gamma: float, tmp_path: Path
) -> None:
    """(1 - p)**(gamma - 1) from d(1 - p)**gamma, inf at p = 1 for gamma < 1, takes the chain's
    factor (1 - p) into its power (simplify._raised); gamma < 2 likewise in the second order.
    The reference is torch on the same formula with 1 - p written as sigmoid(-x), which stays
    positive where 1 - p rounds to 0 (x = 40 in float64; at 800 it is 0 too, and the
    reference nan: compared where it is finite). Absolute tolerances: where 1 - p rounds to 0
    the module's terms are 0 where the reference's are ~1e-27."""
    module, _ = _module("focal_loss_of_a_sure_sigmoid", tmp_path)
    x = torch.tensor([40.0, 800.0, 30.0, 0.3, -2.0, -800.0], dtype=torch.float64)
    mine = x.clone().requires_grad_()
    out = module.Function.apply(mine, gamma)
    (dx,) = torch.autograd.grad(out, mine, create_graph=True)
    ref = x.clone().requires_grad_()
    want = -(torch.sigmoid(-ref) ** gamma * torch.nn.functional.logsigmoid(ref)).sum()
    (want_dx,) = torch.autograd.grad(want, ref, create_graph=True)
    assert torch.isfinite(dx).all(), dx
    torch.testing.assert_close(out, want, rtol=1e-12, atol=0)
    seen = torch.isfinite(want_dx)
    assert seen.sum() >= 5
    torch.testing.assert_close(dx[seen], want_dx[seen], rtol=1e-12, atol=1e-15)
    if gamma > 1:  # below 1 the double backward's dp, the gradient in p, is inf itself
        (ddx,) = torch.autograd.grad(dx.sum(), mine)
        (want_ddx,) = torch.autograd.grad(want_dx.sum(), ref)
        assert torch.isfinite(ddx).all(), ddx
        seen = torch.isfinite(want_ddx)
        torch.testing.assert_close(ddx[seen], want_ddx[seen], rtol=1e-10, atol=1e-15)


def test_log_one_minus_exp_keeps_its_value_and_a_finite_second_order_far_out(
    tmp_path: Path,
) -> None:
    """log(1 - e^-x) is -e^-x far out, not the 0 that log(-expm1(-x)) rounds to past x = 37;
    its second order -e^x / expm1(x)**2 is finite past x = 710, where e^x overflows."""
    module, _ = _module("log_one_minus_exp", tmp_path)
    x = torch.tensor([1e-30, 0.3, 0.7, 2.0, 40.0, 700.0, 710.0, 800.0], dtype=torch.float64)
    mine = x.clone().requires_grad_()
    out = module.Function.apply(mine)
    want = torch.where(x < 0.69, torch.log(-torch.expm1(-x)), torch.log1p(-torch.exp(-x)))
    torch.testing.assert_close(out, want, rtol=1e-15, atol=0)
    assert out[4].item() == pytest.approx(-math.exp(-40.0), rel=1e-15)
    (dx,) = torch.autograd.grad(out.sum(), mine, create_graph=True)
    (ddx,) = torch.autograd.grad(dx.sum(), mine)
    want_ddx = -1 / (torch.expm1(x) * -torch.expm1(-x))  # -e^x / expm1(x)**2
    assert torch.isfinite(ddx).all(), ddx
    torch.testing.assert_close(ddx, want_ddx, rtol=1e-13, atol=1e-300)


def test_a_power_of_one_minus_tanh_has_a_finite_gradient_where_tanh_rounds_to_one(
    tmp_path: Path,
) -> None:
    """1 - tanh(x) is read as 2 sigmoid(-2x) (derive.identities), and the derivative's
    (2 s)**(g - 1) takes sigmoid's own factor s (arithmetic._took_its_factors): (2 s)**g / 2,
    finite where s underflows (x = 800), where (2 s)**(g - 1) s apart was inf * 0. At x = 20,
    where tanh rounds to 1 in float64, the gradient keeps its digits."""
    module, _ = _module("power_of_one_minus_tanh", tmp_path)
    x = torch.tensor([-800.0, -3.0, 0.0, 3.0, 20.0, 800.0], dtype=torch.float64)
    mine = x.clone().requires_grad_()
    (dx,) = torch.autograd.grad(module.Function.apply(mine, 0.5), mine)
    ref = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(((2 * torch.sigmoid(-2 * ref)) ** 0.5 * ref).sum(), ref)
    assert torch.isfinite(dx).all(), dx
    torch.testing.assert_close(dx[:5], want[:5], rtol=1e-12, atol=0)
    assert dx[5] == 0  # -sqrt(2) e^-800 799 underflows


def test_a_power_of_one_minus_a_named_tanh_is_finite_where_tanh_rounds_to_one(
    tmp_path: Path,
) -> None:
    """t = tanh(x) by name: (1 - t)**g's derivative holds 1 - t**2, factored toward the
    power's base (simplify._factored_toward) as (1 - t)**g (1 + t), 0 where t rounds to 1
    (x >= 20 in float64), where autograd's (1 - t)**(g - 1) (1 - t**2) is inf * 0 = nan.
    Below that the gradient is autograd's to the last digits."""
    module, _ = _module("power_of_one_minus_a_named_tanh", tmp_path)
    x = torch.tensor([-800.0, -3.0, 0.0, 3.0, 20.0, 800.0], dtype=torch.float64)
    mine = x.clone().requires_grad_()
    (dx,) = torch.autograd.grad(module.Function.apply(mine, 0.5), mine)
    ref = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(((1 - torch.tanh(ref)) ** 0.5 * ref).sum(), ref)
    assert torch.isnan(want[4:]).all()  # the case is the one autograd fails
    torch.testing.assert_close(dx[:4], want[:4], rtol=1e-12, atol=0)
    assert (dx[4:] == 0).all(), dx  # (1 - 1.0)**0.5 (1 + 1.0) x


@pytest.mark.parametrize(
    ("dtype", "scale"),
    [
        (torch.float64, 1e103),
        (torch.float64, 1e-110),
        (torch.float32, 1e13),
        (torch.float32, 1e-16),
    ],
)
def test_an_inline_l2_norm_has_its_gradient_at_every_scale(dtype, scale, tmp_path) -> None:
    """x / sqrt(S) differentiates to g / sqrt(S) - x Sum(g x) / S**(3/2): S**(3/2) over- or
    underflows where the gradient is finite (a power divided by in steps, arithmetic._divisors;
    its second order's S**(5/2) too). The reference: F.normalize in float64 at scale 1, scaled
    (the gradient of x / |x| at s x is 1/s times, the second derivative 1/s**2 times)."""
    module, _ = _module("l2_normalize_inline", tmp_path)
    x0 = torch.tensor([[3.0, 4.0, -1.0]], dtype=torch.float64)
    g = torch.tensor([[1.0, 0.5, -2.0]], dtype=torch.float64)
    mine = x0.mul(scale).to(dtype).requires_grad_()
    (dx,) = torch.autograd.grad(module.Function.apply(mine), mine, g.to(dtype), create_graph=True)
    (ddx,) = torch.autograd.grad(dx[0, 0], mine)
    ref = x0.clone().requires_grad_()
    want = torch.nn.functional.normalize(ref, dim=1, eps=0.0)
    (want_dx,) = torch.autograd.grad(want, ref, g, create_graph=True)
    (want_ddx,) = torch.autograd.grad(want_dx[0, 0], ref)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert torch.isfinite(dx).all(), dx
    torch.testing.assert_close(dx.double() * scale, want_dx, rtol=tol, atol=0)
    # the second order at 1e103: float32's 1e13 and tiny scales reach the subnormals inside a
    # product that multiplies by the full-size x after dividing by the row's sums (open)
    if scale > 1 and dtype == torch.float64:
        assert torch.isfinite(ddx).all(), ddx
        big = float(want_ddx.abs().max())
        torch.testing.assert_close(ddx.double() * scale**2, want_ddx, rtol=tol, atol=tol * big)


def test_exp_over_expm1_has_finite_derivatives_where_exp_overflows(tmp_path: Path) -> None:
    """d/dx e^x / (e^x - 1) = -1 / (4 sinh(x/2)**2); d2 = coth(x/2) / (4 sinh(x/2)**2): finite
    at |x| = 720 and 800, where e^x or e^-x overflows; gradient, second order and tangent."""
    module, _ = _module("exp_over_expm1", tmp_path)
    x = torch.tensor([-800.0, -720.0, -2.0, 0.5, 3.0, 700.0, 720.0, 800.0], dtype=torch.float64)
    mine = x.clone().requires_grad_()
    (dx,) = torch.autograd.grad(module.Function.apply(mine).sum(), mine, create_graph=True)
    (ddx,) = torch.autograd.grad(dx.sum(), mine)
    _, tangent = torch.func.jvp(module.Function.apply, (x,), (torch.ones_like(x),))
    half = torch.sinh(x / 2) ** 2
    want_dx = -0.25 / half
    want_ddx = 0.25 / (torch.tanh(x / 2) * half)
    for got, want in ((dx, want_dx), (ddx, want_ddx), (tangent, want_dx)):
        assert torch.isfinite(got).all(), got
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-300)


def test_a_square_of_a_difference_stays_whole_in_a_cancelled_denominator(tmp_path: Path) -> None:
    """The Student-t loss's gradient divides by ``nu e^(2 s) + (y - mu)**2``: multiplied out,
    ``mu**2 - 2 mu y + y**2`` cancelled to 32% off at mu = 5e4 and to -inf at 1e5 where
    y - mu = 2**-10 (student_t_nll). The reference keeps the difference, exact there."""
    module, _ = _module("student_t_nll", tmp_path)
    mu = torch.tensor([1e4, 5e4, 1e5, 2.0, -3e7], dtype=torch.float64)
    s = torch.tensor([-8.0, -8.0, -8.0, 0.0, -6.0], dtype=torch.float64)
    y = mu + torch.tensor([2**-10, 2**-10, -(2**-10), 0.5, 2**-3], dtype=torch.float64)
    nu = 3.0
    loss, saved = module.forward(mu, s, y, nu=nu)
    dmu, ds, dy = module.backward(torch.tensor(1.0, dtype=torch.float64), saved)
    d, n = y - mu, mu.numel()
    q = d * d * torch.exp(-2 * s) / nu
    want_dmu = -(nu + 1) * d * torch.exp(-2 * s) / nu / (1 + q) / n
    want_ds = (1 - (nu + 1) * q / (1 + q)) / n
    torch.testing.assert_close(dmu, want_dmu, rtol=1e-13, atol=0)
    torch.testing.assert_close(dy, -want_dmu, rtol=1e-13, atol=0)
    torch.testing.assert_close(ds, want_ds, rtol=1e-13, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exps_a_sigmoid_leaves_beside_each_other_are_merged(dtype, tmp_path: Path) -> None:
    """``log((e^d + e^-d) / 2)``'s gradient is tanh(d); it held ``e^d sigmoid(2d) e^-d``, NaN
    at |d| = 400 (float64) and 100 (float32), where the loss is finite
    (log_cosh_written_with_exps). First and second order against tanh and its derivative."""
    module, _ = _module("log_cosh_written_with_exps", tmp_path)
    x = torch.tensor([1.0, 50.0, 400.0, 1e4, -0.25], dtype=dtype)
    y = torch.tensor([0.0, -50.0, -400.0, 0.0, 0.5], dtype=dtype)
    mine = x.clone().requires_grad_()
    out = module.Function.apply(mine, y)
    (dx,) = torch.autograd.grad(out.sum(), mine, create_graph=True)
    (ddx,) = torch.autograd.grad(dx.sum(), mine)
    d = (x - y).double()
    tol = 1e-6 if dtype == torch.float32 else 1e-14
    assert torch.isfinite(out).all() and torch.isfinite(dx).all() and torch.isfinite(ddx).all()
    torch.testing.assert_close(dx.double(), torch.tanh(d), rtol=tol, atol=tol)
    torch.testing.assert_close(ddx.double(), 1 - torch.tanh(d) ** 2, rtol=tol, atol=tol)


def test_a_power_beside_its_own_expansion_stays_cancelled(tmp_path: Path) -> None:
    """A power collected back only where its expansion stands whole: held as one symbol
    through cancel (this session's first form of the rule),
    ``((u**2 + z**2)**2 / (u**2 + 2 z**2)**2)``'s gradient became ``(P**2 - u**4 - 3 u**2
    z**2 - 2 z**4) / ..``, which cancels at small z, and its mixed second order was NaN at
    z = 1e-39 (found probing the rule). Against the quotient rule written by hand, and the
    second order's exact 0 at x = y."""
    module = _written(
        tmp_path,
        "ratio_of_squares",
        ["x[N]", "y[N]", "z[N]"],
        ["out = Sum(((x[n] - y[n])**2 + z[n]**2)**2 / ((x[n] - y[n])**2 + 2 * z[n]**2)**2, n)"],
    )
    x = torch.tensor([1.0, 1.5, 2.0], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0.0, 1.5, 1.0], dtype=torch.float64)
    z = torch.tensor([1e-5, 1e-39, 3e-3], dtype=torch.float64, requires_grad=True)
    dx, dz = torch.autograd.grad(module.Function.apply(x, y, z), (x, z), create_graph=True)
    (mixed,) = torch.autograd.grad(dx.sum(), z)
    u2, z2 = (x - y).detach() ** 2, z.detach() ** 2
    a, b = u2 + z2, u2 + 2 * z2
    want_dx = 2 * (a / b) * (2 * (x - y).detach() * z2 / b**2)  # b - a is z**2
    # 8e-8 relative at z / u = 1e-5, as before the rule: the collapsed form's own rounding
    torch.testing.assert_close(dx.detach(), want_dx, rtol=1e-6, atol=0)
    assert torch.isfinite(mixed).all() and float(mixed[1]) == 0.0, mixed
