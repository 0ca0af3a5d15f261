"""fuzz case, seed 62"""

# Found by `python -m fuzz` (case seed 62) on d8f7643, shrunk from 4 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(l,
# out_argmax)*KroneckerDelta(l1, labels[out_argmax]))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz62",
    doc="fuzz case, seed 62",
    inputs=[
        "logits[L, L]",
        "labels[L]: int64",
    ],
    definitions=[
        "C[j] = logits[j, labels[j]]",
        "out = Max(C[t], t)",
    ],
)

SEED = 62
