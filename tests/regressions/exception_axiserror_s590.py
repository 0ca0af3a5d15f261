"""fuzz case, seed 590"""

# Found by `python -m fuzz` (case seed 590) on 671ac18, shrunk from 4 definition(s).
# Failed: WRONG (exception AxisError: a value over [] cannot take the axes ['q', 'y'] (at
# derive/torch_code.py:89))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz590",
    doc="fuzz case, seed 590",
    inputs=[
        "Wq[Z]",
        "b2[N, Z]",
        "labels[Z, Z]: int64",
    ],
    definitions=[
        "out[q] = Max(Wq[y]*b2[labels[y, q], q], y)",
    ],
)

SEED = 590
