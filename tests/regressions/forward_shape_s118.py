"""fuzz case, seed 118"""

# Found by `python -m fuzz` (case seed 118) on 912c005, shrunk from 1 definition(s).
# Failed: WRONG (forward shape: logits has shape (3, 5, 4), want (4, 5, 3))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz118",
    doc="fuzz case, seed 118",
    inputs=[
        "W[T, U, J]",
        "Wq[U, J]",
    ],
    definitions=[
        "logits[o, t2, h] = Sum(W[h, t2, o] * Wq[p, m], m, p)",
    ],
)

SEED = 118
