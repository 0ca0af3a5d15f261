"""fuzz case, seed 4130 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 4130) on a7b388b, shrunk from 2 definition(s).
# Failed: WRONG (memory: widest 1,600 entries against autograd's 400 at doubled sizes (+1.00
# degree))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4130",
    doc="fuzz case, seed 4130 (--affine)",
    inputs=[
        "z[Y, Y, Y]",
        "pos[Y]: int64",
        "idx[I, H]: int64",
    ],
    definitions=[
        "res[g, ij, n] = z[ij, pos[ij], idx[n, g*pad]]*Sum(exp(pi)*z[ij, Y - l - 1, l], l)",
    ],
    params={"pad": 2},
    ranges={"g": "H", "l": "Y"},
)

SEED = 4130
