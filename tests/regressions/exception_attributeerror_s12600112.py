"""fuzz case, seed 12600112 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments` (case seed
# 12600112) on 181fb31, shrunk from 3 definition(s).
# Failed: WRONG (exception AttributeError: 'int' object has no attribute 'expand' (in the
# generated module, line 217))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12600112",
    doc="fuzz case, seed 12600112 (--windows --powers --constants --entries --segments)",
    inputs=[
        "W[U, U, D]",
        "w[B, D]",
    ],
    definitions=[
        "W1[x, z] = Sum(W[t, z, x], t)",
        "flat = view(W1, D, U)",
        "v[p, y, o, ij] = Sum(W[p, y, o + i] * w[ij, i] * flat[o + i, U - 1], i)",
    ],
    sizes={"H": "D - D + 1"},
    ranges={"i": "D", "o": "H"},
    stepwise=True,
)

SEED = 12600112
