"""fuzz case, seed 150149"""

# Found by `python -m fuzz` (case seed 150149) on 5f78f51, shrunk from 3 definition(s).
# Failed: WRONG (exception RuntimeError: The size of tensor a (3) must match the size of tensor b
# (4) at non-singleton dimension 0 (in the generated module, line 78))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz150149",
    doc="fuzz case, seed 150149",
    inputs=[
        "Zz[Y]",
        "W1[A]",
    ],
    definitions=[
        "act[aa] = Sum(W1[aa] + Zz[mm], mm)",
        "w[aa] = Sum(W1[y] + act[aa], y) / A",
    ],
)

SEED = 150149
