"""fuzz case, seed 10521 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 10521) on 9199602, shrunk from 5 definition(s):
# the text oracle was wrong (int64 * 0.25 is float32 in torch), the module right.
# Failed: WRONG (forward (text oracle) value: Kx off by 3.33e-08 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz10521",
    doc="fuzz case, seed 10521 (--windows)",
    inputs=[
        "h[R, R, P, P]",
        "C[R, D, Q]",
    ],
    definitions=[
        "gain = view(h, R, R, V, D, P)",
        "W = view(C, V, M, D, Q)",
        "Kx[r, u, y, t2, p] = Sum(sin(0.25*r)*W[y, t2, i, b]*gain[r, -3*b + u, y, i, p], i, b)",
    ],
    params={"grp": 1},
    sizes={"V": "grp", "D": "P / grp", "M": "R / grp"},
    ranges={"b": "Q", "u": "R"},
)

SEED = 10521
