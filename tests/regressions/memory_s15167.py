"""fuzz case, seed 15167 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 15167) on 08b0014, shrunk from 1 definition(s).
# Failed: WRONG (memory: widest 1,000 entries against autograd's 100 at doubled sizes (+1.00
# degree))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz15167",
    doc="fuzz case, seed 15167 (--windows)",
    inputs=[
        "z[L, L]",
        "labels[P, L]: int64",
        "idx[P]: int64",
    ],
    definitions=[
        "res[mm] = Sum(exp(z[c, labels[idx[mm], mm + step]]), c)",
    ],
    params={"step": 2},
)

SEED = 15167
