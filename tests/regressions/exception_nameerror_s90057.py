"""fuzz case, seed 90057"""

# Found by `python -m fuzz` (case seed 90057) on 733bf9f, shrunk from 2 definition(s).
# Failed: WRONG (exception NameError: name 'T' is not defined (in the generated module, line 92))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz90057",
    doc="fuzz case, seed 90057",
    inputs=[
        "Kx[U]",
        "logits[G]",
        "labels[Y]: int64",
        "cls[G]: int64",
    ],
    definitions=[
        "W = view(logits, R, T)",
        "act[s] = Kx[labels[s]]*Sum(exp(W[bb, cls[y]]), y, bb)",
    ],
    params={"lam": 3},
    sizes={"R": "lam", "T": "G / lam"},
)

SEED = 90057
