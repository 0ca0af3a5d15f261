"""fuzz case, seed 1610008"""

# Found by `python -m fuzz` (case seed 1610008) on d4e6d7e, shrunk from 4 definition(s).
# Failed: WRONG (exception ValueError: The argument 'cosh(1/3)/Sum(exp(1/3), (_i32, 0, -2/3),
# (_i33, 0, -2/3))' is not comparable. (at symbolic/canon.py:255))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1610008",
    doc="fuzz case, seed 1610008",
    inputs=[
        "C[I, I, B]",
        "y[Y]",
        "cls[B]: int64",
        "tgt[B]: int64",
        "X[B]: int64",
        "gain[N]",
        "W[N]",
        "u[I, N]",
        "v[3, Y]",
        "Zz[B, Y]",
    ],
    definitions=[
        "s[bb] = maximum(cosh(y[cls[bb]]), -C[X[bb], X[bb], bb] + C[tgt[bb], tgt[bb], bb])/Sum(exp(C[X[z], i, z]), z, i)",
        "Kx = Sum(gain[a] * W[a] * u[i, a], i, a)",
        "a1[h, f] = where(erf(s[h]) * (v[2, f] - I) > 0, where(Kx / (Y * exp(Zz[h, f])) < 0, maximum(Kx, s[h]), sigmoid(eps)), sigmoid(Zz[h, f]) - softplus(eps))",
    ],
    params={"eps": 1.25},
)

SEED = 1610008
