"""fuzz case, seed 7700567"""

# Found by `python -m fuzz` (case seed 7700567) on 5c6e260, shrunk from 3 definition(s).
# Failed: WRONG (exception IndexError: index out of range in self (in the generated module, line
# 200))
# Also wrong on e149b76, the thirty-sixth session's starting engine.
# Fixed the thirty-seventh session: a part the gather rule names apart is read with its guarded
# indices clamped too (derive/lower/equalities.py, _named).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz7700567",
    doc="fuzz case, seed 7700567",
    inputs=[
        "hid[U]",
        "Kx[U, U, U]",
        "cls[U]: int64",
        "Zz[M]",
        "idx[M]: int64",
    ],
    definitions=[
        "act2[l, i, bb] = where(l == cls[bb], where(cls[bb] < 0, 0, hid[cls[bb]] + Kx[i, bb, l]), 0)",
        "y[b, n, a] = Sum(sigmoid(act2[b, n, f]) + Zz[a], f)",
        "a1[f, m] = y[idx[m], f, m]",
    ],
)

SEED = 7700567
