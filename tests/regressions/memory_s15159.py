"""fuzz case, seed 15159 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 15159) on 08b0014, shrunk from 4 definition(s).
# Failed: WRONG (memory: widest 2,048 entries against autograd's 1,024 at doubled sizes (+0.97
# degree))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz15159",
    doc="fuzz case, seed 15159 (--windows)",
    inputs=[
        "v[N]",
        "Wq[N, V]",
        "X[F, N]: int64",
        "prob[V, R, V, R]",
    ],
    definitions=[
        "emb[n1, j, p] = Wq[j, X[p, j]] + v[n1]",
        "z[t, bb, t2] = Max(prob[t, bb, off*t2 + 2, o] + prob[t2, bb, t, o], o)",
    ],
    params={"off": 3},
)

SEED = 15159
