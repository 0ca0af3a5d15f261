"""fuzz case, seed 4142 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 4142) on 5af1511, shrunk from 4 definition(s).
# Failed: WRONG (memory: widest 120,000 entries against autograd's 12,000 at doubled sizes (+1.00
# degree); the unshrunk op +2.00): a delta under a sum under a guard free of the summed
# index (simplify._guard_out);
# + 0.5 added to the maximum's second argument: it tied itself, every draw ill-conditioned.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4142",
    doc="fuzz case, seed 4142 (--affine)",
    inputs=[
        "x[K, K, Q, U]",
        "prob[K, K, U]",
    ],
    definitions=[
        "act[i, j, a] = Max(x[j - 1, a, i, mm]*x[j, a, i, mm], mm)",
        "w[ij, aa, s] = Sum(act[2*ij + 2*v, m, aa]*maximum(prob[m, s, v], prob[aa, aa*dil + 2*ij, v] + 0.5), v, m)",
    ],
    params={"dil": 1},
    sizes={"A": "(Q + 1 - 2*(U - 1) - 1) // 2 + 1"},
    ranges={"ij": "A"},
)

SEED = 4142
