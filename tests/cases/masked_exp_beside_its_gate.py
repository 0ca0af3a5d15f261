"""A logcumsumexp shifted by its running maximum (found by probing, 2026-11-25). The exp of
``x[n, s] - m[n, t]`` is computed over every (t, s), and overflows at s > t, where the causal
where() never reads it; the backward's ``where(s <= t, 1, 0) * exp(..)`` multiplied the mask
in, and 0 * inf made dx nan at x = [0, 800] (torch.logcumsumexp's gradient is [1, 1]). A tensor
the function computes goes inside the gate's selection (derive/lower/arithmetic.py, _gated);
tests/modules/test_stability.py holds it at such inputs."""

from derive import Op

OP = Op(
    name="masked_exp_beside_its_gate",
    inputs=["x[N, T]"],
    ranges={"t": "T"},
    definitions=[
        "m[n, t] = Max(where(s <= t, x[n, s], -inf), s)",
        "out[n, t] = m[n, t] + log(Sum(where(s <= t, exp(x[n, s] - m[n, t]), 0), s))",
    ],
)
