"""fuzz case, seed 620155"""

# Found by `python -m fuzz` (case seed 620155) on e086b8c, shrunk from 1 definition(s).
# Failed: WRONG (exception RuntimeError: size mismatch, got input (2), mat (2x2), vec (60) (in the
# generated module, line 220))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz620155",
    doc="fuzz case, seed 620155",
    inputs=[
        "y[J]",
        "ids[J]: int64",
        "a1[D, T, N, J, J]",
    ],
    definitions=[
        "Zz[u, kk, k] = Sum(exp(-a1[k, kk, u, a, r])*y[ids[r]], a, r)",
    ],
)

SEED = 620155
