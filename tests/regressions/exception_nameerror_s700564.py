"""fuzz case, seed 700564"""

# Found by `python -m fuzz` (case seed 700564) on 40e4be6, shrunk from 6 definition(s).
# Failed: WRONG (exception NameError: name 'w' is not defined (in the generated module, line 275))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz700564",
    doc="fuzz case, seed 700564",
    inputs=[
        "Wq[L]",
        "act[T, L]",
    ],
    definitions=[
        "emb[j, aa, t] = Wq[j] + act[t, aa]",
        "h[j, aa, t] = emb[j, aa, t]",
        "loss[j, aa, t] = h[j, aa, t]*Sum(h[j, q, t], q)",
        "w[g, i, p] = h[p, g, i]",
        "Kx[bb, t] = Sum(loss[bb, t, a], a)",
    ],
)

SEED = 700564
