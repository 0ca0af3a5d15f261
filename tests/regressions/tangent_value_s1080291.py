"""fuzz case, seed 1080291"""

# Found by `python -m fuzz` (case seed 1080291) on 964f4b4, shrunk from 4 definition(s).
# Failed: WRONG (tangent value: t_b2 off by 1.03e-10 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1080291",
    doc="fuzz case, seed 1080291",
    inputs=[
        "w[L, L, N]",
        "gain[L]",
        "v[D]",
        "Wq[N, N, Y, Y]",
        "x[N, N, Y]",
        "tgt[L, N]: int64",
    ],
    definitions=[
        "a1[m, a] = Sum(gain[n] * x[m, c, a], n, c)",
        "b2[o, aa] = minimum(gain[o], D*exp(-a1[aa, tgt[o, aa]])*Abs(gain[o]))",
    ],
    params={"eps": 3},
    sizes={"Q": "eps", "H": "D / eps"},
)

SEED = 1080291
