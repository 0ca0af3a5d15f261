"""fuzz case, seed 1513 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 1513) on 23f4e8d, shrunk from 2 definition(s).
# Failed: WRONG (gradient value: dg off by 1 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1513",
    doc="fuzz case, seed 1513 (--affine)",
    inputs=[
        "g[H]",
        "act[D]",
    ],
    definitions=[
        "x[c] = Max(g[stride*c + r], r)",
        "csum[q] = Sum(x[f] * act[q - f], f)",
    ],
    params={"stride": 1},
    sizes={
        "J": "stride",
        "G": "(H - (stride)) // stride + 1",
        "Z": "(((H - (stride)) // stride + 1) - 1) + D",
    },
    ranges={"c": "G", "q": "Z", "r": "J"},
)

SEED = 1513
