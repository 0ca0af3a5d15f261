"""fuzz case, seed 29"""

# Found by `python -m fuzz` (case seed 29), shrunk from 4 definition(s).
# Failed: WRONG (exception TypeError: 'int' object is not subscriptable)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz29",
    doc="fuzz case, seed 29",
    inputs=[
        "h[B, B, B]",
        "a1[R, B]",
        "Y[L, R]: int64",
        "tgt[L]: int64",
    ],
    definitions=[
        "logits[aa, g] = minimum(a1[g, Y[aa, g]], -h[tgt[aa], Y[aa, g], Y[aa, g]])",
    ],
)

SEED = 29
