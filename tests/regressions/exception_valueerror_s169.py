"""fuzz case, seed 169"""

# Found by `python -m fuzz` (case seed 169) on 912c005, shrunk from 3 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term J*KroneckerDelta(a, pos[j,
# u])*KroneckerDelta(u, tgt[j])*Sum(grad_out[j, j1], (j1, 0, J - 1)))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz169",
    doc="fuzz case, seed 169",
    inputs=[
        "a1[A, U, J]",
        "pos[J, U]: int64",
        "tgt[J]: int64",
    ],
    definitions=[
        "W1[n, p] = Sum(a1[bb, n, p], bb)",
        "x[r, o, aa] = Sum(W1[r, aa]*W1[r, l] + a1[pos[o, r], r, o], l)",
        "h[j, r] = x[tgt[j], j, r]",
    ],
)

SEED = 169
