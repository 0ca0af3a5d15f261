"""fuzz case, seed 13072 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 13072) on eeb3916, shrunk from 1 definition(s).
# Failed: WRONG (engine bug: op 'fuzz13072': internal error: lowering Sum(o*prob[m], (m, 0, T -
# 1)) lost its free index ['o'] (an engine bug: please report it))
# Fixed: a factor free of the summed indices stands outside the sum when it is lowered
# (derive/lower/reductions.py, _factored_out); the same error on ffbb965.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz13072",
    doc="fuzz case, seed 13072 (--windows)",
    inputs=[
        "prob[T]",
    ],
    definitions=[
        "act[ij] = Sum(prob[o]*Sum(o*prob[m], m), o)",
    ],
    ranges={"ij": "T"},
)

SEED = 13072
