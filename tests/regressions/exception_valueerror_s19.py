"""fuzz case, seed 19"""

# Found by `python -m fuzz` (case seed 19) on d8f7643, shrunk from 2 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(h,
# s_argmax))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz19",
    doc="fuzz case, seed 19",
    inputs=[
        "W1[Y, H]",
    ],
    definitions=[
        "emb[f] = Sum(W1[y, f], y)",
        "s = Max(emb[aa], aa)",
    ],
)

SEED = 19
