"""fuzz case, seed 11400364 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 11400364) on c44b402, shrunk from 2 definition(s).
# Failed: WRONG (exception TypeError: index_put(): argument 'values' (position 2) must be Tensor,
# not int (in the generated module, line 165))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz11400364",
    doc="fuzz case, seed 11400364 (--affine)",
    inputs=[
        "Kx[H, H]",
        "u[H, F, H]",
    ],
    definitions=[
        "conv[g, o] = Sum(Kx[2*g + 2*h, z] * u[h, o, z] * where(g > h, u[2*g + 2*h, o, 2*g + 2*h], 0), h, z)",
    ],
    sizes={"U": "(H - 2*(H - 1) - 1) // 2 + 1"},
    ranges={"g": "U"},
)

SEED = 11400364
