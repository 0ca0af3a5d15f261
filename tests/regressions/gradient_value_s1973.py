"""fuzz case, seed 1973 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 1973) on 5fa48e4, shrunk from 4 definition(s).
# Failed: WRONG (gradient value: dact off by 0.977 (relative))
# Silently wrong since the affine reads landed: act2[y] = exp(act[labels[y], 1 - y, y + 2]) reads
# act's zero padding at y + 2 >= M, exp(0) = 1; the fold wrote it as v's lifted v_exp0[.., y + 2],
# which reads 0 there. A fold now leaves an instance whose affine subscript may leave the axis.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1973",
    doc="fuzz case, seed 1973 (--affine)",
    inputs=[
        "act[M, M, M]",
        "labels[M]: int64",
        "logits[M, 3]",
    ],
    definitions=[
        "act2[y] = exp(act[labels[y], -y + 1, y + 2])",
        "v[w, b] = act2[w]*Sum((logits[b + pad - w, 1]**2 + 1)*exp(act[w, b, i]), i)",
    ],
    params={"pad": 2},
    ranges={"y": "M"},
)

SEED = 1973
