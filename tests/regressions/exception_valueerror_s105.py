"""fuzz case, seed 105"""

# Found by `python -m fuzz` (case seed 105) on 912c005, shrunk from 1 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(a,
# a1_argmax)*KroneckerDelta(d, tgt[a1_argmax]))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz105",
    doc="fuzz case, seed 105",
    inputs=[
        "w[A, D]",
        "tgt[A]: int64",
    ],
    definitions=[
        "a1 = Max(w[n1, tgt[n1]], n1)",
    ],
)

SEED = 105
