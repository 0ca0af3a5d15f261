"""fuzz case, seed 4855 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 4855) on 55c9db3 (the same on a20985d), shrunk from 4
# definitions.
# Failed: WRONG (exception TypeError: Invalid comparison of non-real a1 - where(2*m + clamp(-2*m +
# q, 0, Q - 1) >= 0, where(2*m + clamp(-2*m + q, 0, Q - 1) <= Q - 1, 1/Sum(gain_at_2[clamp(2*m +
# clamp(-2*m + q, 0, Q - 1), 0, Q - 1), l1], (l1, 0, L - 1)), 0), 0) (at lower/arithmetic.py:177))
# Fixed: where() is commutative when its branches are (derive/functions.py): SymPy left a
# relation's commutativity unknown, a where of 1/Sum(..) became non-commutative, a - where
# not real, and building a maximum's step comparison raised TypeError.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4855",
    doc="fuzz case, seed 4855 (--affine)",
    inputs=[
        "v[L, L]",
        "pos[Q]: int64",
        "Y[Q]: int64",
        "gain[3, Q, L]",
        "C[Q]",
    ],
    definitions=[
        "a1 = Sum(v[c, aa], c, aa)",
        "x[ij, m] = 1/Sum(gain[2, ij, t], t)",
        "g[u, s] = Sum(C[n]*x[n + 2*u, s]*minimum(a1, x[n + 2*u, n + 2*u]), n)",
    ],
    params={"dil": 2, "stride": 2},
    sizes={"D": "(L + 2*1 - L) // stride + 1", "M": "(Q - Q) // 2 + 1"},
    ranges={"m": "Q", "u": "M"},
)

SEED = 4855
