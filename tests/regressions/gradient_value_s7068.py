"""fuzz case, seed 7068 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 7068) on 23f4e8d, shrunk from 4 definition(s).
# Failed: WRONG (gradient value: da1 off by 0.612 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz7068",
    doc="fuzz case, seed 7068 (--windows)",
    inputs=[
        "a1[G]",
        "logits[G, G]",
    ],
    definitions=[
        "prob[x] = Max(a1[x + pad*r], r)",
        "C[i, u] = Sum(prob[i + 2*a - pad] * logits[u, a], a)",
    ],
    params={"pad": 1},
    sizes={
        "K": "pad",
        "T": "G - pad*((pad) - 1) - 1 + 1",
        "N": "(G - pad*((pad) - 1) - 1 + 1) + 2*pad - 2*(G - 1) - 1 + 1",
    },
    ranges={"i": "N", "r": "K", "x": "T"},
)

SEED = 7068
