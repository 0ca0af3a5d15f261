"""fuzz case, seed 13400175 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments --compiled` (case
# seed 13400175) on f5cc629, shrunk from 2 definition(s).
# Failed: WRONG (compiled exception InductorError: TypeError: cannot determine truth value of
# Relational: 1 < s50 (at relational.py:519), dynamic shapes)
# Open: under dynamic shapes Inductor asks a SymPy relational between sizes for its truth ("cannot
# determine truth value of Relational: 1 < s50") compiling a segment-sum's where() under a
# convolution over kk + o; not located.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it), and
# fuzz.compiled.run_compiled_case(OP, SEED) too (tests/modules/test_compiled.py).
from derive import Op

OP = Op(
    name="fuzz13400175",
    doc="fuzz case, seed 13400175 (--windows --powers --constants --entries --segments)",
    inputs=[
        "v[B, A]",
        "act[F]",
        "Zz[P]",
        "pos[A, P]: int64",
        "C[B, A, P]",
        "Kx[Z, F]",
    ],
    definitions=[
        "tmp[w, x, k] = Sum(where(pos[k, w] != x, 0, v[x, k] * act[p] * Zz[w]), p) + C[x, k, w]",
        "logits[s, u, kk, m] = Sum(Kx[o, m]*tmp[s, u, kk + o], o)",
    ],
    params={"dil": 3},
    sizes={"Z": "dil", "U": "A - (dil) + 1"},
    ranges={"kk": "U", "s": "P", "u": "B"},
)

SEED = 13400175
