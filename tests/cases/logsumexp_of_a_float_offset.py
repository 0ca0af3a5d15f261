"""A logsumexp of x shifted by a decimal constant past exp's range, ``x + 1000.5``."""

from derive import Op

OP = Op(
    name="logsumexp_of_a_float_offset",
    doc="logsumexp_c(x[n, c] + 1000.5), shifted by its maximum (probing, twenty-second session).",
    inputs=["x[N, C]"],
    definitions=[
        "s[n, c] = x[n, c] + 1000.5",
        "m[n] = Max(s[n, c], c)",
        "out[n] = m[n] + log(Sum(exp(s[n, c] - m[n]), c))",
    ],
)
