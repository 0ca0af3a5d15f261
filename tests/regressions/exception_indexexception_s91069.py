"""fuzz case, seed 91069"""

# Found by `python -m fuzz` (case seed 91069) on 733bf9f, shrunk from 3 definition(s).
# Failed: WRONG (exception IndexException: Indexed needs at least one index. (at
# lower/select.py:127))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz91069",
    doc="fuzz case, seed 91069",
    inputs=[
        "b2[2, B]",
        "cls[2]: int64",
        "x[2]",
    ],
    definitions=[
        "act2[n1] = b2[1, cls[0]] + x[n1]",
    ],
)

SEED = 91069
