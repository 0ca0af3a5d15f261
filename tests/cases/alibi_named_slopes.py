"""Multi-head ALiBi with its constants named as definitions: a slope per head,
``2**(-8 (h + 1) / H)``, and the 0-d scale ``1/sqrt(D)``. Neither reads a tensor; each is
taken into the definitions that read it (derive/language/constants.py). Refused before
("the right-hand side reads no tensor")."""

from derive import Op

OP = Op(
    name="alibi_named_slopes",
    inputs=["q[H, T, D]", "k[H, T, D]", "v[H, T, D]"],
    ranges={"h": "H"},
    definitions=[
        "slope[h] = 2**(-8*(h + 1)/H)",
        "scale = 1/sqrt(D)",
        "s[h, i, j] = Sum(q[h, i, d] * k[h, j, d], d) * scale - slope[h] * (i - j)",
        "m[h, i] = Max(where(j <= i, s[h, i, j], -inf), j)",
        "e[h, i, j] = where(j <= i, exp(s[h, i, j] - m[h, i]), 0)",
        "out[h, i, d] = Sum(e[h, i, j] * v[h, j, d], j) / Sum(e[h, i, j], j)",
    ],
)
