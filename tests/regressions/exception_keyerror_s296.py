"""fuzz case, seed 296 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 296) on 0997ee3, shrunk from 4 definition(s)
# (unused sizes and ranges dropped by hand). A lifted tanh read x only affinely under a Max.
# Failed: WRONG (exception KeyError: x (at symbolic/saving.py:84))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz296",
    doc="fuzz case, seed 296 (--affine)",
    inputs=[
        "a1[R, R, R]",
        "C[M, H]",
        "s[R]",
    ],
    definitions=[
        "out[k, n, t2] = Max(tanh(s[off*t2 + 2*x - 1])*a1[k, n, off*t2 + 2*x - 1], x)",
    ],
    params={"off": 1},
    sizes={"P": "(R + 2*1 - 2*(M - 1) - 1) // off + 1"},
    ranges={"t2": "P", "x": "M"},
)

SEED = 296
