"""fuzz case, seed 940482"""

# Found by `python -m fuzz` (case seed 940482) on 5afa9ae, shrunk from 4 definition(s).
# Failed: WRONG (exception RuntimeError: The size of tensor a (3) must match the size of tensor b
# (2) at non-singleton dimension 0 (in the generated module, line 105))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz940482",
    doc="fuzz case, seed 940482",
    inputs=[
        "v[A, U]",
        "C[Q]",
    ],
    definitions=[
        "hid[i, z, q] = Sum(C[z] + v[y, i] + v[y, q], y)",
    ],
)

SEED = 940482
