"""fuzz case, seed 9717 (--windows), reduced by hand"""

# Found by `python -m fuzz --windows` (case seed 9717) on ccef355; reduced by hand to its last
# definition. Refused (second order not derived): the double backward's lowering met
# where(f*groups + g1 - groups*(f + 3) + 3*groups >= 0, 1, 0), whose f cancels, and the
# lost-axis check (Context.verified) took f for a free index the value had lost: an engine bug
# raised where there was none. The check now reads index expressions expanded.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz9717",
    doc="fuzz case, seed 9717 (--windows), reduced by hand",
    inputs=[
        "b2[F, F, F]",
        "W1[J, F]",
        "s[Y, I, G]",
        "labels[G]: int64",
    ],
    definitions=[
        "gain = view(W1, L, I, F)",
        "g = view(s, L, U, I, G)",
        "act[l, y, r] = Sum(gain[l, f, groups*r + o - 2] * g[l, y, f, o] * ((W1[labels[o], r - 1] / J) * (b2[r - 3, groups*r + o - 2, r - 3] / J)), f, o)",
    ],
    params={"groups": 2},
    sizes={"L": "groups", "I": "J / groups", "A": "(F + 2*2 - G) // groups + 1", "U": "Y / groups"},
    ranges={"r": "A"},
)

SEED = 9717
