"""fuzz case, seed 700637"""

# Found by `python -m fuzz` (case seed 700637) on 40e4be6, shrunk by hand from 4 definition(s).
# Failed: REFUSED (second order not derived: internal error: lowering where(Zz[u1] - a1[u1, u] >= 0,
# 0, cosh(..)*where(b2[z] >= tau, 0, 1)*where(b2[z] >= tau, 1, 0)*grad_y[u1, u, z]) lost its free
# index ['z']); then a sum over an unused index, then addcmul() given the number 0 as a tensor.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz700637",
    doc="fuzz case, seed 700637",
    inputs=[
        "hid[U]",
        "Zz[U]",
        "b2[Z]",
        "a1[U, U]",
    ],
    params={"tau": 0.5},
    definitions=[
        "tmp[l, y, c] = cosh(where(Zz[l] - a1[l, y] >= 0, a1[l, y], where(b2[c] >= tau, hid[y], hid[l])))",
    ],
)

SEED = 700637
