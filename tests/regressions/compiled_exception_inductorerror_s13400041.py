"""fuzz case, seed 13400041 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments --compiled` (case
# seed 13400041) on f5cc629, shrunk from 4 definition(s).
# Failed: WRONG (compiled exception InductorError: CppCompileError: C++ compile error (at
# torch/_inductor/cpp_builder.py:713), dynamic shapes)
# Open: the class of 13200159 at sizes of 3 and 4: Inductor's C++ for the backward checks the
# bounds of an index by a variable (tmp26) its vectorised loop never declares, and g++ refuses the
# line; dynamic shapes, not located.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13400041",
    doc="fuzz case, seed 13400041 (--windows --powers --constants --entries --segments)",
    inputs=[
        "act[K, K, K]",
    ],
    definitions=[
        "out[p, j, t2] = Sum(where(t > j, act[p, t, t2] * softplus(act[t, j, t - 1]), 0), t)",
        "W[x, f, bb] = act[bb, f, K - x - 1] + out[x, f, f + 1]",
    ],
)

SEED = 13400041
