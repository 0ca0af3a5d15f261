"""fuzz case, seed 239"""

# Found by `python -m fuzz` (case seed 239), shrunk from 2 definition(s).
# Failed: WRONG (exception StopIteration: )
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz239",
    doc="fuzz case, seed 239",
    inputs=[
        "h[F]",
        "W1[F, H, H, F]",
    ],
    definitions=[
        "u[n1, a] = Sum(Sum(h[g] * W1[n1, a, m, mm], g, m), mm) / Sum(softplus(h[b]) * exp(h[t]), b, t)",
    ],
)

SEED = 239
