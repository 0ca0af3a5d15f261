"""fuzz case, seed 1140401"""

# Found by `python -m fuzz` (case seed 1140401) on 5ced05e, shrunk from 5 definition(s).
# Failed: WRONG (exception IndexError: list index out of range (in the generated module, line
# 414))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1140401",
    doc="fuzz case, seed 1140401",
    inputs=[
        "g[U, Y, Y]",
        "b2[Y]",
        "a1[Y, U, Y, Y]",
    ],
    definitions=[
        "s[o, t, t2] = where(t2 <= t, Sum(where(b2[t] < 0, b2[t], 0) - a1[o, t2, u, i], u, i), -inf)",
        "z[kk] = Max(Sum(g[kk, p, i] + s[i, p, t2], t2, p), i)",
    ],
)

SEED = 1140401
