"""A strided window read twice with shifts, ``x[z, mm - step*kk]`` beside ``s[kk + dil]``: the
second order solves one delta for mm, then another for kk = g - dil, and the subscript became
``x[a, -dil*step + g*step + h - step*(-dil + g)]``, which is ``x[a, h]`` but held g until
expanded; the lowering found no axis for g and the second order was refused with an engine
error (fuzz --affine 3337, shrunk by hand). Substituted subscripts are expanded now."""

from derive import Op

OP = Op(
    name="strided_window_shifted_twice",
    doc="sum_kk x[z, mm - step kk] s[kk] (s[kk + dil] - s[kk]) relu-ish(x[z, mm - step kk]).",
    inputs=["x[A, H]", "s[G]"],
    params={"dil": 2, "step": 2},
    ranges={"kk": "G", "mm": "H"},
    definitions=[
        "csum[z, mm] = Sum(x[z, mm - step*kk] * s[kk] * ((s[kk + dil] - s[kk])"
        " * where(x[z, mm - step*kk] <= 0, x[z, mm - step*kk], 0)), kk)",
    ],
)
