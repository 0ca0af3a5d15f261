"""Cross-entropy with an ignore_index written as users write it, ``where(t[n] != -1, ..)``,
the mean over the counted positions (F.cross_entropy(x, t, ignore_index=-1)). An unequal
comparison was no guard: every call with a -1 was refused as outside the axis. Now t is read
clamped and the check admits exactly -1 outside [0, C) (a -2 is refused, on every device:
the clamp hides it from the kernels), and an ignored row's gradient is exactly 0."""

from derive import Op

OP = Op(
    name="ignore_index_unequal",
    doc="Mean cross-entropy of x[N, C] against t[N], targets of -1 ignored.",
    inputs=["x[N, C]", "t[N]: int64"],
    definitions=[
        "m[n] = Max(x[n, c], c)",
        "lse[n] = m[n] + log(Sum(exp(x[n, c] - m[n]), c))",
        "loss = Sum(where(t[n] != -1, lse[n] - x[n, t[n]], 0), n)"
        " / Sum(where(-1 != t[n], 1, 0), n)",
    ],
)
