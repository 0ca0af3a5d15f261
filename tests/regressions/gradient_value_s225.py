"""fuzz case, seed 225 (--affine)"""

# Found by `python -m fuzz` (case seed 225) on 389f874, shrunk from 3 definition(s).
# Failed: WRONG (gradient value: dhid off by 0.987 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz225",
    doc="fuzz case, seed 225 (--affine)",
    inputs=[
        "hid[U]",
        "Zz[U, B]",
        "pos[G]: int64",
        "labels[G]: int64",
    ],
    definitions=[
        "h[w, g] = Max(Zz[2*w + d - dil, g], d)",
        "gain = view(h, F, B)",
        "x[l] = gain[pos[l - 2], labels[l]]/Sum(hid[b*step - l], b)",
    ],
    params={"dil": 1, "step": 1},
    sizes={"F": "(U + dil - U) // 2 + 1"},
    ranges={"b": "U", "d": "U", "w": "F"},
    stepwise=True,
)

SEED = 225
