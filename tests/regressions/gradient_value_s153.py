"""fuzz case, seed 153"""

# Found by `python -m fuzz` (case seed 153) on 912c005, shrunk from 2 definition(s).
# Failed: WRONG (gradient value: dC off by 0.264 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz153",
    doc="fuzz case, seed 153",
    inputs=[
        "C[J, J]",
        "Wq[V, J, L]",
        "W1[V, J, J]",
    ],
    definitions=[
        "act[h, i, mm] = Sum(C[y, mm]*W1[h, i, y]*Wq[h, i, r], y, r)",
    ],
)

SEED = 153
