"""fuzz case, seed 9918 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 9918) on ba47eaa, shrunk from 4 definition(s).
# Failed: WRONG (engine bug: op 'fuzz9918': internal error: lowering Sum(v[v1]*Sum(grad_out[v1,
# u1, clamp(l + 1, 0, L - 1)], (u1, 0, U - 1)), (v1, 0, V - 1)) lost its free index ['l'] (an
# engine bug: please report it))
# The contraction's planner took the indices of affine subscripts for axes, not those of a
# subscript held in range (clamp(l + 1, 0, L - 1), from the second order of w[f] = cos(emb[f - 1,
# ..])): l was planned away and the lowering's own check refused it. Same class: seed 9914.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz9918",
    doc="fuzz case, seed 9918 (--windows)",
    inputs=[
        "Kx[N, N]",
        "v[V]",
        "cls[U, V]: int64",
        "emb[L, U]",
        "pos[L]: int64",
        "prob[V, L, U]",
    ],
    definitions=[
        "C[r, d] = v[d]",
        "w[f] = cos(emb[f - 1, pos[f]])",
        "y[t2, p, c] = C[p, t2]*w[c]",
    ],
    params={"tau": 3},
    ranges={"d": "V", "r": "U"},
)

SEED = 9918
