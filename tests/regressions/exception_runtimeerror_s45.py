"""fuzz case, seed 45"""

# Found by `python -m fuzz` (case seed 45), shrunk from 3 definition(s).
# Failed: WRONG (exception RuntimeError: The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 1)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz45",
    doc="fuzz case, seed 45",
    inputs=[
        "w[P, P]",
        "idx[J, P]: int64",
        "prob[Q]",
    ],
    definitions=[
        "W1[i] = Sum(w[v, i], v)",
        "Kx[f, a, t] = Sum(W1[idx[t, f]]*W1[mm] + prob[a], mm)",
    ],
)

SEED = 45
