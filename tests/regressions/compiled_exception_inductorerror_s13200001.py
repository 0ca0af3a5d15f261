"""fuzz case, seed 13200001 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments --compiled` (case
# seed 13200001) on 50b7a29, shrunk from 3 definition(s).
# Failed: WRONG (compiled exception InductorError: AssertionError:  (at
# torch/_inductor/codegen/cpp.py:3055), dynamic shapes)
# Fixed: an index_add into an axis of length 1 is the sum along it when compiling (the
# template's _index_add); Inductor asserted in its vectorised atomic add, whose index is the
# constant 0 there (Q = 1 in this draw; reproduced in plain torch).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13200001",
    doc="fuzz case, seed 13200001 (--windows --powers --constants --entries --segments)",
    inputs=[
        "logits[Q]",
        "x[Q]",
        "W1[Q, P]",
        "Y[P]: int64",
        "X[P]: int64",
        "pos[L]: int64",
    ],
    definitions=[
        "Kx[kk] = logits[pos[kk]]",
    ],
    sizes={"V": "(Q - 3*(Q - 1) - 1) // 3 + 1"},
)

SEED = 13200001
