"""fuzz case, seed 342"""

# Found by `python -m fuzz` (case seed 342) on 912c005, shrunk from 3 definition(s).
# Failed: WRONG (exception ValueError: unsupported delta term grad_out*KroneckerDelta(Kx_argmax,
# j1))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz342",
    doc="fuzz case, seed 342",
    inputs=[
        "Wq[I, J, J]",
    ],
    definitions=[
        "emb[g] = Sum(Wq[z, mm, g], mm, z)",
        "Kx = Max(emb[p], p)",
    ],
)

SEED = 342
