"""A logsumexp over two axes per row, unshifted as written, beside an unshifted one over a
masked score that the parser must leave as it is (a row masked whole is log(0) = -inf there,
where a shift by its -inf maximum would be NaN)."""

from derive import Op

OP = Op(
    name="logsumexp_over_two_axes",
    inputs=["x[N, H, W]", "s[N, T]"],
    definitions=[
        "a[n] = log(Sum(exp(x[n, h, w]), h, w))",
        "b[n] = log(Sum(exp(where(t <= n, s[n, t], -inf)), t))",
        "out[n] = a[n] + b[n]",
    ],
)
