"""A softmax with a temperature written as the exp of a quotient, ``exp((x - m) / T)``, T a 0-d
input, read by its entropy and by a cross-entropy pick. ``log(p)`` is split for range as
``(x - m) / T - log(sum)``: SymPy writes exp(a) as E**a, whose exponent was asked whether it
is real as it stands, and a quotient by T is not (T may be 0, where exp(a) is undefined too),
so the log stayed whole: an entropy of NaN at logits of [2000, 0, 0], a cross-entropy of inf
at float32 logits of [0, 200, 0] (found by probing; the case with x / T named first split)."""

from derive import Op

OP = Op(
    name="softmax_of_a_scaled_exp",
    inputs=["x[N, A]", "T", "t[N]: int64"],
    definitions=[
        "m[n] = Max(x[n, a], a)",
        "e[n, a] = exp((x[n, a] - m[n]) / T)",
        "p[n, a] = e[n, a] / Sum(e[n, a2], a2)",
        "out[n] = -Sum(p[n, a] * log(p[n, a]), a) - log(p[n, t[n]])",
    ],
)
