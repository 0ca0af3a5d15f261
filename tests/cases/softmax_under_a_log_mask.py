"""A softmax masked by adding log(keep): SymPy reads exp(s - m), s = x + log(keep), as
keep * exp(x - m), 0 * inf where keep = 0 and the masked logit is 1e4 (found by probing);
the lowering puts keep back in its exp (derive.language.logs)."""

from derive import Op

OP = Op(
    name="softmax_under_a_log_mask",
    doc="torch.softmax(x + keep.log(), 1).",
    inputs=["x[N, C]", "keep[N, C]"],
    definitions=[
        "s[n, c] = x[n, c] + log(keep[n, c])",
        "m[n] = Max(s[n, c], c)",
        "p[n, c] = exp(s[n, c] - m[n]) / Sum(exp(s[n, k] - m[n]), k)",
    ],
)
