"""fuzz case, seed 12300714"""

# Found by `python -m fuzz` (case seed 12300714) on 183960c, shrunk from 4 definition(s).
# Failed: WRONG (second order value: d2/dlogits off by 0.999 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12300714",
    doc="fuzz case, seed 12300714",
    inputs=[
        "logits[R, A, U]",
        "ids[H, U]: int64",
        "idx[H]: int64",
    ],
    definitions=[
        "tmp[d, s] = Sum(R + logits[ids[s, d], x, d], x)**2",
        "W1 = Sum(log1p(((3) * H) * exp(tmp[idx[bb], bb])), bb) / H",
    ],
)

SEED = 12300714
