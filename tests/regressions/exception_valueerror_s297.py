"""fuzz case, seed 297"""

# Found by `python -m fuzz` (case seed 297) on d8f7643, shrunk from 4 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term KroneckerDelta(q,
# x_argmax[u])*KroneckerDelta(t, ids[q, u])*grad_out[u])
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz297",
    doc="fuzz case, seed 297",
    inputs=[
        "C[U, Q, T]",
        "ids[Q, U]: int64",
    ],
    definitions=[
        "x[i] = Max(C[i, n1, ids[n1, i]], n1)",
    ],
)

SEED = 297
