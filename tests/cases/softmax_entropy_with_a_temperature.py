"""The entropy of softmax(x / tau), tau a param (an exploration bonus; found by probing,
2026-11-25). log(p) of a softmax is rewritten for range as ``(x / tau - m) - log(sum exp)``
only where the split ``log(exp(a) r) = a + log(r)`` holds for every value of a; ``x / tau``
is not real at tau = 0, so it was left as log(p): 0 * log(0) = nan in the forward at logits of
[250, 0, 0] in float32, where torch's entropy is 0. A quotient by a param is real wherever it
is defined (at tau = 0 neither side is), and the split holds there."""

from derive import Op

OP = Op(
    name="softmax_entropy_with_a_temperature",
    inputs=["x[N, A]"],
    params={"tau": 2.0},
    definitions=[
        "z[n, a] = x[n, a] / tau",
        "m[n] = Max(z[n, a], a)",
        "p[n, a] = exp(z[n, a] - m[n]) / Sum(exp(z[n, a2] - m[n]), a2)",
        "out[n] = -Sum(p[n, a] * log(p[n, a]), a)",
    ],
)
