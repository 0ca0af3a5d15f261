"""fuzz case, seed 1000"""

# Found by `python -m fuzz` (case seed 1000) on 53cb757, shrunk from 2 definition(s).
# Failed: WRONG (exception TypeError: addcmul(): argument 'tensor2' (position 3) must be Tensor,
# not int (in the generated module, line 111))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1000",
    doc="fuzz case, seed 1000",
    inputs=[
        "g[P]",
        "pos[P]: int64",
        "logits[G, B, P, G]",
    ],
    definitions=[
        "w[i] = g[pos[i]]",
        "h[p, k] = Sum(g[y] + logits[p, r, u, k], u, r, y)",
    ],
    stepwise=True,
)

SEED = 1000
