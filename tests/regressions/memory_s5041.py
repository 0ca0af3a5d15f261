"""fuzz case, seed 5041 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 5041) on adbab6e, shrunk from 3 definition(s).
# Failed: WRONG (memory: widest 6,000,000 entries against autograd's 1,000 at doubled sizes (+3.58
# degree)): deltas over the outer sums' indices in the terms of an Add under a sum over h
# (simplify._held_apart).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz5041",
    doc="fuzz case, seed 5041 (--affine)",
    inputs=[
        "hid[G, G, D]",
    ],
    definitions=[
        "u[c, d, n1] = Sum(hid[aa*stride + d*tau, c, n1]*hid[c, aa*stride + d*tau, n1*stride]*hid[c, aa*stride + d*tau, n1], aa)",
    ],
    params={"stride": 1, "tau": 2},
    sizes={"F": "stride", "H": "(G + tau - stride*((stride) - 1) - 1) // tau + 1"},
    ranges={"aa": "F", "d": "H"},
)

SEED = 5041
