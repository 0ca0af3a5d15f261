"""fuzz case, seed 15164 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 15164) on 08b0014, shrunk from 4 definition(s).
# Failed: WRONG (memory: widest 6,400 entries against autograd's 400 at doubled sizes (+2.00
# degree))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz15164",
    doc="fuzz case, seed 15164 (--windows)",
    inputs=[
        "W1[G, A]",
        "g",
        "logits[D, G, Y, I]",
        "tgt[J, N]: int64",
        "cls[J]: int64",
    ],
    definitions=[
        "C[w, aa, k] = Sum(logits[aa, k, t2, t], t2, t)",
        "res[z, ij] = Sum(exp(-C[cls[z], tgt[z, ij], bb]), bb)",
    ],
    params={"grp": 2},
    sizes={"D": "grp", "Y": "A / grp", "I": "grp", "U": "(G + 2*grp - (grp)) // 3 + 1"},
    ranges={"w": "U"},
)

SEED = 15164
