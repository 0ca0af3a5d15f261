"""fuzz case, seed 7800310 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 7800310) on 2e06cdf, shrunk from 4 definition(s).
# Failed: WRONG (exception IndexError: tensors used as indices must be long, int, byte or bool
# tensors (in the generated module, line 169))
# Also wrong on e149b76, the thirty-sixth session's starting engine.
# Fixed the thirty-seventh session: index arithmetic is never tabulated as a float table
# (derive/lower/reductions.py, _tabulated).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz7800310",
    doc="fuzz case, seed 7800310 (--windows)",
    inputs=[
        "act[Q, B, Q]",
        "a1[Q, B, V]",
        "pos[Q]: int64",
        "labels[Q]: int64",
        "ids[Q]: int64",
        "W1[Q]",
        "s[Z, 2]",
        "b2[2, V]",
    ],
    definitions=[
        "Wq = Max(W1[bb], bb)",
        "u[kk, j] = softplus(Wq) * a1[2*j - 2*kk - step, pad*kk + stride, j - dil]",
        "Kx[aa, c, x] = Sum(a1[aa + w, c, x]*u[c, x], w)",
    ],
    params={"dil": 1, "pad": 1, "step": 2, "stride": 1},
    sizes={"R": "Q - Z + 1"},
    ranges={"aa": "R", "j": "V", "kk": "B", "w": "Z"},
)

SEED = 7800310
