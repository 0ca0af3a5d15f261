"""fuzz case, seed 2038 (--powers)"""

# Found by `python -m fuzz --powers` (case seed 2038) on af3b56d, shrunk from 3 definition(s).
# Failed: WRONG (second order value: d2/dx off by inf (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz2038",
    doc="fuzz case, seed 2038 (--powers)",
    inputs=[
        "x[H, V]",
        "pos[H]: int64",
    ],
    definitions=[
        "out[t] = x[t, pos[t]]",
        "act2[bb] = relu(out[bb])**alpha",
    ],
    params={"alpha": 1.5},
)

SEED = 2038
