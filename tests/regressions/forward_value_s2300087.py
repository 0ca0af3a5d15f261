"""fuzz case, seed 2300087"""

# Found by `python -m fuzz` (case seed 2300087) on cad969f, shrunk from 2 definition(s).
# Failed: WRONG (forward value: w off by 1.79 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz2300087",
    doc="fuzz case, seed 2300087",
    inputs=[
        "b2[F, F, F]",
        "labels[F]: int64",
        "cls[F]: int64",
    ],
    definitions=[
        "w = Sum(exp(log(F * exp(b2[cls[j], labels[j], j]))), j) / F",
    ],
)

SEED = 2300087
