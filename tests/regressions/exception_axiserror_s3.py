"""fuzz case, seed 3"""

# Found by `python -m fuzz` (case seed 3) on d8f7643, shrunk from 3 definition(s).
# Failed: WRONG (exception AxisError: a value over [] cannot take the axes ['h', 'n', 'm'])
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz3",
    doc="fuzz case, seed 3",
    inputs=[
        "W[N]",
        "Y[N]: int64",
        "W1[L, N, L]",
        "pos[N]: int64",
    ],
    definitions=[
        "prob[o, t, m] = Sum(W1[m, j, o] + W[Y[t]], j)",
        "tmp[h, n, m] = W1[pos[m], m, h]*prob[n, m, h]",
    ],
)

SEED = 3
