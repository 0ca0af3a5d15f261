"""fuzz case, seed 1160073"""

# Found by `python -m fuzz` (case seed 1160073) on 95a0808, 3 definition(s).
# Failed: WRONG (exception UnboundLocalError: cannot access local variable 'shared_idx' where it
# is not associated with a value (in the generated module, line 210))
# A sum computed once for two readers that a later rewrite left unread ran unguarded while
# what it read ran only where needs asked for it (derive/ir/dead.py drops it).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1160073",
    doc="fuzz case, seed 1160073",
    inputs=[
        "C[N]",
        "prob[F]",
        "emb[N, N, N]",
        "idx[M]: int64",
    ],
    definitions=[
        "Zz[n1, y] = C[y] + Sum(emb[y, t2, n1], t2)",
        "W1[v, g] = where(g <= v, (C[v] * C[v]) - Zz[v, idx[g]], -inf)",
        "W[n1] = 1/Sum(exp(W1[idx[f], f])*prob[n1], f)",
    ],
)

SEED = 1160073
