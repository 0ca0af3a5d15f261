"""fuzz case, seed 8900117"""

# Found by `python -m fuzz` (case seed 8900117) on 6c24d71, shrunk from 4 definition(s).
# Failed: WRONG (second order value: d2/dgrad_out off by 1 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz8900117",
    doc="fuzz case, seed 8900117",
    inputs=[
        "g[Z]",
        "X[B]: int64",
        "labels[B]: int64",
    ],
    definitions=[
        "qh = view(g, G, T)",
        "C[aa] = qh[X[aa], labels[aa]]",
    ],
    params={"alpha": 2},
    sizes={"G": "alpha", "T": "Z / alpha"},
)

SEED = 8900117
