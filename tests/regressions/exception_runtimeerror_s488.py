"""fuzz case, seed 488"""

# Found by `python -m fuzz` (case seed 488) on a2620e6, shrunk from 1 definition(s).
# Failed: WRONG (exception RuntimeError: permute(): duplicate dims are not allowed.)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz488",
    doc="fuzz case, seed 488",
    inputs=[
        "C[R, R, R]",
        "pos[R]: int64",
    ],
    definitions=[
        "w[t] = Sum(C[pos[n], t, n], n)",
    ],
)

SEED = 488
