"""A second order whose where() aligns a broadcast again (fuzz --windows 6500171, shrunk).

Its second derivative aligned ``s[:, None]``, a value already broadcast, to more axes. The
broadcast's rank was counted as its ``kept`` flags alone, not its operand's axes: at 572e46c
the module was refused ("emitted code is not valid Python", ``x[]``), and with that read as no
broadcast the size-1 axis went to the wrong place, d2/dz 0.29 off at `derive check`'s seed 0
(silently: the sizes broadcast). ``value.align`` asks ``orders.rank`` now.
"""

from derive import Op

OP = Op(
    name="broadcast_aligned_twice",
    doc="fuzz --windows 6500171, shrunk: a second order that aligns a broadcast again",
    inputs=["z[Z, Z, Z]", "Y[J, J]: int64", "g[B, J]"],
    definitions=[
        "v = Sum(z[x, 2*x + dil, h], h, x)",
        "s[q, u, l] = z[l, l, Y[q, u]]",
        "scores[q, u, l] = s[q, u, l]",
        "Kx[q, u, l] = scores[q, u, l] / Sum(scores[a, u, l], a)",
        "C[n1, bb, i, t2] = Sum(where(i > t2, Kx[t2, n1, dil*i + kk], v)*g[kk, t2]"
        "*scores[n1, bb, dil*i + kk], kk)",
    ],
    params={"dil": 2, "off": 1},
    sizes={"B": "off", "P": "(Z + 1 - (off)) // dil + 1"},
    ranges={"i": "P", "l": "Z", "q": "J"},
)
