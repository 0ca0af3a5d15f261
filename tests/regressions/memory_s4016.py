"""fuzz case, seed 4016 (--affine)"""

# Found by `python -m bench.widest --fuzz affine` (case seed 4016) on f4c5047, shrunk to one
# definition by the widest tensor's growth (+2 degrees over autograd's).
# Failed: the backward's diagonal pick delta(h, tgt[p]) delta(h1, tgt[p]), a term beside
# another in a sum over p, was a mask over (p, h, h1); its second order kept the same.
# Fixed: a term holding a delta against data read at the summed index is summed apart
# (simplify._delta_terms_apart, _holds_delta_over), then scattered.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4016",
    doc="fuzz case, seed 4016 (--affine)",
    inputs=[
        "s[H, H]",
        "tgt[P]: int64",
    ],
    definitions=[
        "W[w] = s[tgt[w], tgt[w]]*Sum(s[aa + step, i - 1], i, aa)",
    ],
    params={"step": 1},
    ranges={"aa": "H", "i": "H"},
)

SEED = 4016
