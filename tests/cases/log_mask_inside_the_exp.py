"""A log mask written inside the exp and its Max: ``exp(x + log(keep) - m)`` is
``keep exp(x - m)`` to SymPy the moment it is read, so the forward itself was nan at a masked
logit of 1e4 (derive.language.logs)."""

from derive import Op

OP = Op(
    name="log_mask_inside_the_exp",
    doc="torch.softmax(x + keep.log(), 1) @ v, the log written in each exp.",
    inputs=["x[N, C]", "keep[N, C]", "v[C, D]"],
    definitions=[
        "m[n] = Max(x[n, c] + log(keep[n, c]), c)",
        "p[n, c] = exp(x[n, c] + log(keep[n, c]) - m[n]) "
        "/ Sum(exp(x[n, k] + log(keep[n, k]) - m[n]), k)",
        "out[n, d] = Sum(p[n, c] * v[c, d], c)",
    ],
)
