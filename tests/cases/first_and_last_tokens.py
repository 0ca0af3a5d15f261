"""Single entries of an axis whose length is known only at run time: a classifier's first
token (BERT's CLS, `h[b, 0, c]`), the last one (`h[b, T - 1, c]`), one before it, and every
token's difference from the first. Each is a slice forward and a masked scatter backward; the
forward checks T is long enough for the entries it reads (T >= 2 here)."""

from derive import Op

OP = Op(
    name="first_and_last_tokens",
    inputs=["h[B, T, C]", "w[C]"],
    definitions=[
        "d[b, t, c] = h[b, t, c] - h[b, 0, c]",
        "p[b, c] = tanh(h[b, 0, c]) * h[b, T - 1, c]",
        "out[b, c] = p[b, c] + w[c] * Sum(d[b, t, c], t) * h[b, T - 2, c]",
    ],
)
