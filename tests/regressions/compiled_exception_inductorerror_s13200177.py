"""fuzz case, seed 13200177 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments --compiled` (case
# seed 13200177) on 50b7a29, shrunk from 4 definition(s).
# Failed: WRONG (compiled exception InductorError: AssertionError:  (at
# torch/_inductor/codegen/cpp.py:3055), dynamic shapes)
# Fixed: compiled, the template's _index_put adds at each index's flat row (a sum where the
# indexed axes hold one row); Inductor's vectorised atomic add asserted on the constant index of
# an axis of length 1 (reproduced in plain torch).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13200177",
    doc="fuzz case, seed 13200177 (--windows --powers --constants --entries --segments)",
    inputs=[
        "hid[L, L, L]",
    ],
    definitions=[
        "w[g, aa] = Max(hid[g, u, aa], u)",
        "conv[mm, b] = Max(w[mm + o - 1, b], o)",
    ],
    sizes={"T": "L + 1 - L + 1"},
    ranges={"mm": "T", "o": "L", "u": "L"},
)

SEED = 13200177
