"""fuzz case, seed 28"""

# Found by `python -m fuzz` (case seed 28) on 912c005, shrunk from 1 definition(s).
# Failed: WRONG (forward value: Kx off by 1.8 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz28",
    doc="fuzz case, seed 28",
    inputs=[
        "gain[U, U, U]",
        "C[U, U]",
    ],
    definitions=[
        "Kx[ij, r, x] = Sum(C[ij, x]*gain[x, u, r], u)",
    ],
)

SEED = 28
