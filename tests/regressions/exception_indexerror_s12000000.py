"""fuzz case, seed 12000000 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments` (case seed
# 12000000) on 39639c2, shrunk from 4 definition(s); the same on 587bb65.
# Failed: WRONG (exception IndexError: index out of range in self (in the generated module, line
# 191))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12000000",
    doc="fuzz case, seed 12000000 (--windows --powers --constants --entries --segments)",
    inputs=[
        "s[D, D]",
        "Wq[H, D, D]",
        "logits[2, T]",
        "cls[T, D]: int64",
        "tgt[D, Q]: int64",
        "gain[Q, D]",
        "C[Q]",
        "Y[D]: int64",
    ],
    definitions=[
        "tmp = Sum(where(Y[o] != kk, 0, gain[stride*kk + 2, o] * C[kk - I + 1]), o, kk)",
    ],
    params={"stride": 3},
    sizes={"I": "Q - D + 1"},
    ranges={"kk": "I"},
)

SEED = 12000000
