"""fuzz case, seed 219"""

# Found by `python -m fuzz` (case seed 219), shrunk from 3 definition(s).
# Failed: WRONG (exception RuntimeError: The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 4)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz219",
    doc="fuzz case, seed 219",
    inputs=[
        "prob[H]",
        "X[H, I]: int64",
        "s[H, H, H]",
    ],
    definitions=[
        "b2[o, w] = Sum(prob[X[o, w]]*prob[X[t2, w]] + s[d, l, j], d, j, t2, l)",
    ],
)

SEED = 219
