"""fuzz case, seed 1038"""

# Found by `python -m fuzz` (case seed 1038, the 200-case slice) on a2d5123, shrunk by hand.
# Failed: WRONG (gradient value: du off by 1.03 (relative)): the derivative where(b <= v, 0, 1)
# was emitted as `mask * 0 + 1 * ~mask` with a product's precedence, so `g * ...` bound to the
# mask term only.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1038",
    doc="fuzz case, seed 1038",
    inputs=[
        "u[G, G]",
        "ids[G]: int64",
        "emb[G, G, G, G]",
    ],
    definitions=[
        "b2[p] = u[p, ids[p]]",
        "act[o, b, v] = Sum(where(b <= v, 0.5 * emb[b, v, o, p], b2[p]), p) / G",
    ],
)

SEED = 1038
