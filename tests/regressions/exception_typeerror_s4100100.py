"""fuzz case, seed 4100100 (--segments)"""

# Found by `python -m fuzz --segments` (case seed 4100100) on 69b75de, shrunk from 3
# definition(s).
# Failed: WRONG (exception TypeError: pad(): argument 'input' (position 1) must be Tensor, not int
# (in the generated module, line 224))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4100100",
    doc="fuzz case, seed 4100100 (--segments)",
    inputs=[
        "Kx[G]",
        "w[G, H]",
        "X[H]: int64",
        "cls[H]: int64",
        "Y[G]: int64",
    ],
    definitions=[
        "logits = view(w, G, F, P)",
        "emb = Sum(where(Y[r] == v, minimum(Kx[r], Kx[r]) - logits[r, cls[v], X[v]], 0), r, v)",
    ],
    params={"scale": 3},
    sizes={"F": "scale", "P": "H / scale"},
)

SEED = 4100100
