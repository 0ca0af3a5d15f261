"""fuzz case, seed 170151"""

# Found by `python -m fuzz` (case seed 170151) on 0a1d61c, shrunk from 2 definition(s).
# Failed: WRONG (exception IndexError: index out of range in self (in the generated module, line
# 124))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz170151",
    doc="fuzz case, seed 170151",
    inputs=[
        "act[J, J, I]",
        "ids[I]: int64",
        "pos[I]: int64",
    ],
    definitions=[
        "v[ij, l] = act[ij, ids[l], l]**2 + act[ij, ids[l], l]",
        "tmp[i] = sin(where(pos[i] >= 0, v[ids[i], pos[i]], 0))",
    ],
)

SEED = 170151
