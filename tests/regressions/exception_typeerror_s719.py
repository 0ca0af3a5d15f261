"""fuzz case, seed 719"""

# Found by `python -m fuzz` (case seed 719) on 671ac18, shrunk from 4 definition(s).
# Failed: WRONG (exception TypeError: Cannot convert complex to float (at
# derive/torch_code.py:73))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz719",
    doc="fuzz case, seed 719",
    inputs=[
        "W[R, B]",
    ],
    definitions=[
        "g[c] = Max(relu(pi) * W[q, c], q)",
    ],
)

SEED = 719
