"""fuzz case, seed 1830681 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 1830681) on 03bcfa0: IndexError, "tensors used
# as indices must be long" in the generated backward (1830725 and 1830917 too). A power of an
# int param in a subscript (the stride pad**2 of dWq's gather) called the module's _pow, which
# made every power a float, so the index tensor became a float one.
# Fixed: _pow keeps an int's whole power an int where int64 holds it.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1830681",
    doc="fuzz case, seed 1830681 (--affine)",
    inputs=["Zz[M, R, M, R]", "Wq[R, R]"],
    definitions=["h[ij, a] = Sum(Zz[a, pad*u - 1, ij, p] * Wq[p, u + pad*ij + 1], p, u)"],
    params={"pad": 2},
    sizes={"K": "(R - pad*((pad) - 1) - 1) // pad + 1"},
    ranges={"u": "K"},
)

SEED = 1830681
