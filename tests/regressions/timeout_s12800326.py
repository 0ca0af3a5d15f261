"""fuzz case, seed 12800326 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 12800326) on 10d0ac2, shrunk from 6 definition(s).
# Failed: WRONG (timeout: no result within 30 s of CPU)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12800326",
    doc="fuzz case, seed 12800326 (--affine)",
    inputs=[
        "Zz[K, K]",
    ],
    definitions=[
        "Wq[n1, k] = Sum(Zz[u, k], u)",
        "a1[j, n] = Wq[n, j]",
        "Kx[n] = Max(a1[j, n], j)",
        "att[j, n] = exp(a1[j, n] - Kx[n])",
        "w[j, n] = att[j, n] / Sum(att[z, n], z)",
        "prob[t, x] = (pi * w[x, t]) / (w[t, x]**2 + 1/2)",
    ],
    ranges={"n1": "K"},
)

SEED = 12800326
