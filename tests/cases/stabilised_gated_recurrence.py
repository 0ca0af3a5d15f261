"""An xLSTM-style stabilised recurrence: ``m[t] = max_{s <= t} (c[t] - c[s] + li[s])`` and
``h[t] = sum_{s <= t} exp(c[t] - c[s] + li[s] - m[t]) x[s]``, c the running sum of log-decays
(found by probing, 2026-11-25). The exp overflows at s > t, where the causal where() never
reads it, once the gates reach ~1e3. The double backward multiplied the exp's adjoint (0
there) by it: that adjoint is a sum of terms gated by the causal mask, one of them gated again
by the Max's argmax, so the terms' masks differed and none was remembered (``zero_mask`` of a
sum now keeps the gates common to every term). tests/modules/test_stability.py holds it."""

from derive import Op

OP = Op(
    name="stabilised_gated_recurrence",
    inputs=["x[T]", "la[T]", "li[T]"],
    ranges={"t": "T"},
    definitions=[
        "c[t] = Sum(where(s <= t, la[s], 0), s)",
        "m[t] = Max(where(s <= t, c[t] - c[s] + li[s], -inf), s)",
        "out[t] = Sum(where(s <= t, exp(c[t] - c[s] + li[s] - m[t]) * x[s], 0), s)",
    ],
)
