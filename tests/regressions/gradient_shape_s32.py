"""fuzz case, seed 32"""

# Found by `python -m fuzz` (case seed 32) on 912c005, shrunk from 3 definition(s).
# Failed: WRONG (gradient shape: dprob has shape (), want (2,))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz32",
    doc="fuzz case, seed 32",
    inputs=[
        "hid[D, R, D]",
        "prob[I]",
    ],
    definitions=[
        "out[p, t, a] = Sum(hid[p, t, a]*prob[x], x)",
    ],
)

SEED = 32
