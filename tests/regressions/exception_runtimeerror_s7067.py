"""fuzz case, seed 7067 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 7067) on e36aab7, shrunk from 3 definition(s).
# Failed: WRONG (exception RuntimeError: shape mismatch: value tensor of shape [3, 1, 2] cannot be
# broadcast to indexing result of shape [3, 1, 1] (in the generated module, line 141))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz7067",
    doc="fuzz case, seed 7067 (--windows)",
    inputs=[
        "W[R, Q]",
    ],
    definitions=[
        "y[q, i] = Max(W[q + j, i], j)",
        "s[r, g] = Sum(y[r, g + k], k)",
    ],
    params={"stride": 2},
    sizes={"M": "R - R + 1", "V": "Q + stride - R + 1"},
    ranges={"g": "V", "j": "R", "k": "R", "q": "M"},
)

SEED = 7067
