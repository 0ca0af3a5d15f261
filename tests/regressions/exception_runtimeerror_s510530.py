"""fuzz case, seed 510530"""

# Found by `python -m fuzz` (case seed 510530) on 1b64d1f, shrunk from 2 definition(s).
# Failed: WRONG (exception RuntimeError: index -1 is out of bounds for dimension 1 with size 5 (in
# the generated module, line 198))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz510530",
    doc="fuzz case, seed 510530",
    inputs=[
        "hid[A, A, A]",
        "tgt[A, A]: int64",
        "labels[A]: int64",
    ],
    definitions=[
        "g[j, t2] = where(tgt[j, t2] >= 0, hid[tgt[j, t2], t2, j], 0)",
        "prob[q] = where(labels[q] >= 0, g[q, labels[q]], 0)",
    ],
)

SEED = 510530
