"""fuzz case, seed 13340 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 13340) on 81c3237, shrunk from 2 definition(s).
# Failed: WRONG (gradient value: dW1 off by 4.54e-09 (relative))
# Fixed: a function of an int-valued argument (a clamped index) casts it to the inputs' dtype
# first (derive/lower/arithmetic.py, _as_float); the same on eeb3916.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz13340",
    doc="fuzz case, seed 13340 (--windows)",
    inputs=[
        "W1[I]",
    ],
    definitions=[
        "out[r] = Sum(expm1(r)*W1[r - 3*t], t)",
    ],
    ranges={"r": "I", "t": "I"},
)

SEED = 13340
