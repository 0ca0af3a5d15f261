"""fuzz case, seed 12 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 12) on aceee55, shrunk by hand from 2
# definition(s): a max pool, x read at bb - m under a Max over m.
# Failed: REFUSED (derivation: op 'fuzz12': 'z1' has no value in the generated function): the
# adjoint reads ds[z] = sum_z1 delta(z, z1 - w_argmax[z1]) grad_out[z1], a subscript with a
# term of int data, which the lowering did not take for an affine one (nor its tangent's gather).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12",
    doc="fuzz case, seed 12 (--affine)",
    inputs=[
        "s[Z]",
    ],
    definitions=[
        "w[bb] = Max(s[bb - m], m)",
    ],
    params={"step": 2},
    sizes={"K": "step"},
    ranges={"bb": "Z", "m": "K"},
)

SEED = 12
