"""A gated linear recurrence written as a sum, ``h[t] = sum_{s <= t} exp(c[t] - c[s]) x[s]``
with ``c`` the running sum of log-decays (found by probing, 2026-11-25). ``exp(c[t] - c[s])``
is computed over every (t, s) and overflows at s > t once the decays sum past -709, where the
causal where() never reads it. The first order selected; the double backward was inf and nan
there: the exp's adjoint, a sum of terms gated alike, remembered no mask (``zero_mask`` of a
sum), and the contraction ``sum_t2 where(t <= t2, 1, 0) where(t1 <= t2, 1, 0) g[t2] e[t, t2]``
took the two masks as one float matrix (``0 * inf``), where no one tensor covered both
(``reductions._gates_onto_overflows``). tests/modules/test_stability.py holds it at such
inputs."""

from derive import Op

OP = Op(
    name="gated_recurrence",
    inputs=["x[N, T]", "la[N, T]"],
    ranges={"t": "T"},
    definitions=[
        "c[n, t] = Sum(where(s <= t, la[n, s], 0), s)",
        "out[n, t] = Sum(where(s <= t, exp(c[n, t] - c[n, s]) * x[n, s], 0), s)",
    ],
)
