"""fuzz case, seed 1700428"""

# Found by `python -m fuzz` (case seed 1700428) on 9e421d2, shrunk from 4 definition(s).
# Failed: WRONG (exception AttributeError: 'int' object has no attribute 'is_finite' (at
# symbolic/canon.py:260))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1700428",
    doc="fuzz case, seed 1700428",
    inputs=[
        "prob[H, H]",
        "Y[Z]: int64",
        "v[R, Z]",
        "z[Z, 3, Z]",
    ],
    definitions=[
        "u[t] = prob[Y[t], Y[t]]",
        "Kx[s] = u[s]",
        "y[d, x, l] = where(l < d, where(v[x, l] < z[d, 2, l], Kx[d], Kx[l]), R)",
    ],
)

SEED = 1700428
