"""fuzz case, seed 50456"""

# Found by `python -m fuzz` (case seed 50456) on 3636efc, shrunk from 4 definition(s).
# Failed: WRONG (exception TypeError: unsupported operand type(s) for -: 'GreaterThan' and
# 'GreaterThan' (at symbolic/canon.py:214))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz50456",
    doc="fuzz case, seed 50456",
    inputs=[
        "W1[P, P]",
        "Kx[P, P]",
    ],
    definitions=[
        "out[r, h] = where(r >= h, Kx[r, h], Kx[h, r]*W1[h, r])",
    ],
)

SEED = 50456
