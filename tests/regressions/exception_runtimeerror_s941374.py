"""fuzz case, seed 941374"""

# Found by `python -m fuzz` (case seed 941374) on 5afa9ae, shrunk from 4 definition(s).
# Failed: WRONG (exception RuntimeError: The size of tensor a (5) must match the size of tensor b
# (3) at non-singleton dimension 0 (in the generated module, line 148))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz941374",
    doc="fuzz case, seed 941374",
    inputs=[
        "act[Y, F, L]",
        "idx[A, L]: int64",
        "X[A]: int64",
        "emb[L, 3]",
    ],
    definitions=[
        "logits[n1, n, a] = act[idx[n1, a], X[n], a]",
        "W1 = view(logits, A, A*L)",
        "hid[aa, j] = Sum(2 + (W1[aa, i] + emb[j, 1]), i)",
    ],
    stepwise=True,
)

SEED = 941374
