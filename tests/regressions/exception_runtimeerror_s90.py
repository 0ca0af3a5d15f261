"""fuzz case, seed 90"""

# Found by `python -m fuzz` (case seed 90), shrunk from 2 definition(s).
# Failed: WRONG (exception RuntimeError: The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 2)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz90",
    doc="fuzz case, seed 90",
    inputs=[
        "act[M]",
        "s[L, L]",
        "idx[M, I]: int64",
    ],
    definitions=[
        "w[m, bb, ij] = Sum(exp(s[idx[ij, m], c])*act[bb], c)",
    ],
)

SEED = 90
