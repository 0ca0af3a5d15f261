"""fuzz case, seed 61 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 61) on 0997ee3, shrunk from 4 definition(s).
# Failed: WRONG (gradient value: dlogits off by 0.223 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz61",
    doc="fuzz case, seed 61 (--affine)",
    inputs=[
        "Wq[I, I]",
        "gain[I]",
        "logits[U, I]",
        "X[U]: int64",
        "tgt[A, U]: int64",
    ],
    definitions=[
        "csum[t, r] = Sum(Wq[t, r*stride - stride + 2*y]*gain[y], y)",
        "h[c] = logits[c - 1, X[c]]",
        "C = Sum(csum[X[k], tgt[bb, k]] + h[k], k, bb)",
    ],
    params={"stride": 2},
    sizes={"B": "(I + stride - 2*(I - 1) - 1) // stride + 1"},
    ranges={"c": "U", "r": "B"},
)

SEED = 61
