"""fuzz case, seed 15992 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 15992) on 01241b6 (the same on a20985d), one definition.
# Failed: WRONG (gradient value: dlogits off by 0.0662 (relative))
# Fixed: a product of indices in an index expression is lowered whole, broadcast over both
# axes (derive/lower/indexing.py, _affine): t's arange was laid along a's axis as a
# coefficient's, a wrong comparison where the sizes agree.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz15992",
    doc="fuzz case, seed 15992 (--windows)",
    inputs=[
        "logits[B, B, B]",
    ],
    definitions=[
        "act[a, t, x] = maximum((a + t)**2, logits[a, x, t])",
    ],
)

SEED = 15992
