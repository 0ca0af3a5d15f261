"""fuzz case, seed 160920"""

# Found by `python -m fuzz` (case seed 160920) on 279ef55, shrunk from 11 definition(s).
# Failed: WRONG (gradient value: dy off by inf (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz160920",
    doc="fuzz case, seed 160920",
    inputs=[
        "a1[Y]",
        "y[N, T]",
        "labels[N, J]: int64",
        "idx[J, N]: int64",
        "X[J]: int64",
    ],
    definitions=[
        "logits[u, n] = where(n <= u, y[u, labels[u, n]] + y[u, idx[n, u]], -inf)",
        "v[u, n] = logits[u, n]",
        "W[kk] = v[X[kk], kk]/Sum(cosh(logits[X[kk], w]), w)",
    ],
)

SEED = 160920
