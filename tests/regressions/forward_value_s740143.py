"""fuzz case, seed 740143"""

# Found by `python -m fuzz` (case seed 740143) on 45d2ebe, shrunk from 1 definition(s).
# Failed: WRONG (forward value: Kx off by inf (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz740143",
    doc="fuzz case, seed 740143",
    inputs=[
        "act[A, R, A]",
        "b2",
        "cls[R]: int64",
    ],
    definitions=[
        "Kx[n1] = Max(where(b2 <= 0, inf, 0) + act[cls[n1], n1, l], l)",
    ],
)

SEED = 740143
