"""fuzz case, seed 13100163"""

# Found by `python -m fuzz --compiled` (case seed 13100163) on 50b7a29, shrunk from 3
# definition(s).
# Failed: WRONG (compiled gradient value: dW off by 1 (relative), dynamic shapes)
# Fixed: compiled, the template's _index_put adds at each index's flat row by one index_add
# (Inductor summed an index_put of broadcast indices (arange(B)[:, None], arange(B), ids) wrongly
# under dynamic shapes, or corrupted the heap; reproduced in plain torch).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13100163",
    doc="fuzz case, seed 13100163",
    inputs=[
        "W[B, B, B]",
        "a1[I]",
        "ids[B, B]: int64",
    ],
    definitions=[
        "b2[n1, s] = Sum(W[n1, c, ids[n1, c]] + a1[s], c)",
    ],
)

SEED = 13100163
