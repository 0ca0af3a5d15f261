"""fuzz case, seed 13200229 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments --compiled` (case
# seed 13200229) on 50b7a29, shrunk from 2 definition(s).
# Failed: WRONG (compiled exception AssertionError: expected size 96==96, stride 1==5 at dim=1;
# expected size 5==5, stride 96==1 at dim=2 (at
# cjcpcvzrjpxqtvnwpg7hyo2ikocaubnis2prfclc5t22pcwtgdub.py:155), dynamic shapes)
# Fixed: compiled, a convolution's permuted operand is copied row-major first (_dense); a permuted
# grad_out reshaped to (1, C, 1) is a view that reads as channels-last, and Inductor planned the
# conv_transpose1d's output row-major under dynamic shapes (reproduced in plain torch).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13200229",
    doc="fuzz case, seed 13200229 (--windows --powers --constants --entries --segments)",
    inputs=[
        "u[M, I]",
        "z[M, I, V, K, I]",
    ],
    definitions=[
        "gain[b, c, d, n1, l] = Sum(u[b, c]*z[b, c, d, 3*n1 + q, l], q)",
    ],
    params={"dil": 3},
    sizes={"R": "dil", "P": "(K - (dil)) // 3 + 1"},
    ranges={"n1": "P", "q": "R"},
)

SEED = 13200229
