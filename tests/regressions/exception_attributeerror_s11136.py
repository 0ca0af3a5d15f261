"""fuzz case, seed 11136 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 11136) on d3422fa, shrunk from 4 definition(s).
# Failed: WRONG (exception AttributeError: 'NoneType' object has no attribute 'axes' (at
# lower/context.py:100))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz11136",
    doc="fuzz case, seed 11136 (--windows)",
    inputs=[
        "W[D]",
        "hid[D, D]",
        "emb[G, D, D]",
        "h[J, T]",
        "tgt[T]: int64",
        "idx[T]: int64",
        "X[J]: int64",
        "Zz[J, D]",
        "Kx[G]",
    ],
    definitions=[
        "logits[g] = Sum((W[s] - W[s]) + Kx[g], s)",
    ],
    params={"off": 3},
    ranges={"s": "D"},
)

SEED = 11136
