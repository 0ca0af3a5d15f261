"""fuzz case, seed 1501090"""

# Found by `python -m fuzz` (case seed 1501090) on d26709a, shrunk from 4 definition(s).
# Failed: WRONG (exception TypeError: Cannot convert expression to float (at ir/printer.py:77))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1501090",
    doc="fuzz case, seed 1501090",
    inputs=[
        "g[3, A]",
        "C[3, 3, M]",
    ],
    definitions=[
        "h[b, t] = Sum(g[2, t] + C[t2, n, b], t2, n)",
    ],
)

SEED = 1501090
