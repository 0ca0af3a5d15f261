"""fuzz case, seed 12538 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 12538) on ffbb965, shrunk from 2 definition(s).
# Fixed: the lowering multiplied out (1 - s) q to split off its one-hot terms
# (derive/lower/value.py, delta_terms).
# Failed: WRONG (second order value: d2/dact off by 1.26e-08 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12538",
    doc="fuzz case, seed 12538 (--windows)",
    inputs=[
        "act[K, Z, K]",
        "Wq[K]",
        "X[Z, Y]: int64",
        "ids[Z, H]: int64",
    ],
    definitions=[
        "x[v, m, i] = exp(3*act[m, i, v]/2)",
        "C[ij, n] = Max(sigmoid(cosh(x[X[kk, n], ids[kk, ij], kk])), kk)",
    ],
    ranges={"m": "K"},
)

SEED = 12538
