"""fuzz case, seed 1029546"""

# Found by `python -m fuzz` (case seed 1029546) on f29ee61 (the same on a20985d), shrunk from 3
# definitions.
# Failed: WRONG (tangent value: t_x off by 7.36e-06 (relative))
# Not the module's: torch's forward-mode formula for minimum, other_t + mask * (self_t -
# other_t), cancels against an unselected tangent of 1e13 in the reference; the generated jvp
# agrees with reverse mode to 4e-16. Fixed in the harness: a reference whose forward and
# reverse modes break the adjoint identity gives no tangent verdict (fuzz/check.py, adjoint).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1029546",
    doc="fuzz case, seed 1029546",
    inputs=[
        "C[U, J, R, R]",
        "idx[N]: int64",
        "labels[N, R]: int64",
    ],
    definitions=[
        "tmp[p, i, h] = Sum(J*exp(3*C[i, h, f, p]/2), f)",
        "x[bb] = Sum(minimum(tmp[y, bb, labels[t, y]], exp(tmp[y, bb, idx[t]]/2)), t, y)",
    ],
)

SEED = 1029546
