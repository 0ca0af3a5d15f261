"""fuzz case, seed 13174 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 13174) on 798d0df, shrunk from 3 definition(s).
# Failed: WRONG (engine bug: op 'fuzz13174': internal error: lowering Sum((q + q1)*Sum(hid[r, 2*r,
# q1], (r, 0, R - 1)), (q1, 0, Q - 1)) lost its free index ['q'] (an engine bug: please report
# it))
# Fixed: an index read as a number is an axis of what reads it (derive/lower/value.py,
# Scope.axes); a contraction planned without it lost it.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz13174",
    doc="fuzz case, seed 13174 (--windows)",
    inputs=[
        "x[G, B]",
        "hid[R, R, Q]",
        "pos[Q]: int64",
        "cls[Q]: int64",
    ],
    definitions=[
        "loss[o] = x[cls[o*stride + stride], pos[o]]*Sum((o + p)*hid[s, 2*s, p], p, s)",
    ],
    params={"stride": 2},
)

SEED = 13174
