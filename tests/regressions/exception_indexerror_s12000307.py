"""fuzz case, seed 12000307 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments` (case seed
# 12000307) on 486e0aa, shrunk from 3 definition(s); the same on 587bb65.
# Failed: WRONG (exception IndexError: index 1 is out of bounds for dimension 0 with size 1 (in
# the generated module, line 404))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12000307",
    doc="fuzz case, seed 12000307 (--windows --powers --constants --entries --segments)",
    inputs=[
        "hid[L]",
        "Kx[J, Q]",
        "idx[I]: int64",
        "labels[I]: int64",
    ],
    definitions=[
        "b2 = view(hid, U, D)",
        "loss[b] = where(Sum(b2[y, labels[b]], y) > 0, sigmoid(Kx[idx[1 - b], 1 - b]), 0)",
    ],
    params={"eps": 3, "off": 2, "stride": 3},
    sizes={"U": "eps", "D": "L / eps", "I": "Q + 2*off - stride*(Q - 1) - 1 + 1"},
)

SEED = 12000307
