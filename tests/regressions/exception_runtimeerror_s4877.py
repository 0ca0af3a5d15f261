"""fuzz case, seed 4877 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 4877) on 55c9db3 (the same on a20985d),
# shrunk from 5 definitions.
# Failed: WRONG (exception RuntimeError: scatter(): Expected self.dtype to be equal to src.dtype
# (in the generated module, line 193))
# Fixed: what a scatter adds is in the target's dtype (derive/lower/assign.py, _source): a
# count sum_q delta(v, pad*q + 2) added ones as int64 into a float tensor.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4877",
    doc="fuzz case, seed 4877 (--affine)",
    inputs=[
        "h[J]",
        "u[M, M, Q]",
        "hid[Q, V, M]",
    ],
    definitions=[
        "y[ij, m, w] = Sum(u[ij, m, w] * hid[w, pad*q + 2, m], q)",
    ],
    params={"eps": 3, "pad": 2},
    sizes={"U": "eps", "N": "J / eps", "T": "(V - 1) + J"},
    ranges={"q": "T"},
)

SEED = 4877
