"""fuzz case, seed 12400516 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments` (case seed
# 12400516) on 183960c (not shrunk: one definition).
# Failed: WRONG (exception AttributeError: 'int' object has no attribute 'expand' (in the
# generated module, line 196))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12400516",
    doc="fuzz case, seed 12400516 (--windows --powers --constants --entries --segments)",
    inputs=[
        "b2[N, T]",
        "hid[R, A]",
    ],
    definitions=[
        "v[aa, n] = Sum(b2[m, n] + hid[R - 1, aa - T + 1], m)",
    ],
    ranges={"aa": "T"},
)

SEED = 12400516
