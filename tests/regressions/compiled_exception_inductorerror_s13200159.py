"""fuzz case, seed 13200159 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments --compiled` (case
# seed 13200159) on 50b7a29, shrunk from 4 definition(s).
# Failed: WRONG (compiled exception InductorError: CppCompileError: C++ compile error (at
# torch/_inductor/cpp_builder.py:713), dynamic shapes)
# Open: Inductor's C++ for the backward's bounds check of a gather does not compile (a VectorizedN
# temporary in a constant expression), dynamic shapes, sizes of 1; not located.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13200159",
    doc="fuzz case, seed 13200159 (--windows --powers --constants --entries --segments)",
    inputs=[
        "hid[H, T, H]",
        "act[T, A, Y]",
        "z[T, V, M]",
        "cls[Y, T]: int64",
        "X[Y]: int64",
        "labels[Y]: int64",
    ],
    definitions=[
        "b2 = view(z, N, D, V, M)",
        "Kx[aa, m, n1, q] = Sum(cosh(z[aa - 3*x, X[q], labels[q]])*b2[m, n1, v, x], v, x)",
    ],
    params={"ng": 1, "pad": 1, "stride": 1},
    sizes={"N": "ng", "V": "A / ng", "M": "pad", "D": "T / ng"},
    ranges={"aa": "T", "x": "M"},
    stepwise=True,
)

SEED = 13200159
