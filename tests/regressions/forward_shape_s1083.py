"""fuzz case, seed 1083"""

# Found by `python -m fuzz` (case seed 1083) on d8f7643, shrunk from 1 definition(s).
# Failed: WRONG (forward shape: C has shape (3,), want ())
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1083",
    doc="fuzz case, seed 1083",
    inputs=[
        "prob[G, D]",
        "pos[D]: int64",
    ],
    definitions=[
        "C = Sum(prob[pos[k], k], k)",
    ],
)

SEED = 1083
