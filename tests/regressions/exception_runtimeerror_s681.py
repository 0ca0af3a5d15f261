"""fuzz case, seed 681"""

# Found by `python -m fuzz` (case seed 681) on a2620e6, shrunk from 3 definition(s).
# Failed: WRONG (exception RuntimeError: The size of tensor a (5) must match the size of tensor b
# (3) at non-singleton dimension 2)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz681",
    doc="fuzz case, seed 681",
    inputs=[
        "Wq[Q, D]",
        "Kx[A]",
        "ids[Q, F]: int64",
        "a1[D]",
    ],
    definitions=[
        "W1[n1, k] = Max(Wq[t2, k] + Kx[ids[t2, n1]], t2)",
        "Zz[t2] = a1[t2]",
    ],
)

SEED = 681
