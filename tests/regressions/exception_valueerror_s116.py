"""fuzz case, seed 116"""

# Found by `python -m fuzz` (case seed 116), shrunk from 1 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(i, prob_argmax))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name='fuzz116',
    doc='fuzz case, seed 116',
    inputs=[
        'b2[A, I]',
    ],
    definitions=[
        'prob = Max(Sum(b2[t, w], t), w)',
    ],
)

SEED = 116
