"""fuzz case, seed 9008 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 9008) on 305c353, shrunk from 2 definition(s).
# Failed: WRONG (second order value: d2/dgrad_out off by 0.121 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz9008",
    doc="fuzz case, seed 9008 (--windows)",
    inputs=[
        "s[Y]",
        "b2[Y, Y, Y]",
        "cls[Y]: int64",
    ],
    definitions=[
        "x[a] = exp(b2[cls[a - 2], 2*a + 1, cls[3*a - 2]])*Sum(s[l + 4], l)",
        "u[h, v] = x[2*h + step] * s[v]",
    ],
    params={"step": 3},
    ranges={"a": "Y", "h": "Y", "l": "Y"},
)

SEED = 9008
