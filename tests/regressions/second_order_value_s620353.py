"""fuzz case, seed 620353"""

# Found by `python -m fuzz` (case seed 620353) on e086b8c, shrunk from 3 definition(s).
# Failed: WRONG (second order value: d2/dact off by 1.25 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz620353",
    doc="fuzz case, seed 620353",
    inputs=[
        "act[Y]",
        "C[Y, Y]",
    ],
    definitions=[
        "W[r] = Sum(C[r, n1] * act[n1], n1)",
        "logits[bb] = W[bb]*Sum(W[o], o)",
    ],
)

SEED = 620353
