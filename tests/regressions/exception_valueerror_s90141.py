"""fuzz case, seed 90141"""

# Found by `python -m fuzz` (case seed 90141) on 733bf9f, shrunk from 7 definition(s).
# Failed: WRONG (exception ValueError: The argument 'exp(Wq[bb] + where(aa <= bb, -s[aa, bb,
# labels[aa]] + Max(1.5, T), -oo))' is not comparable. (at symbolic/indices.py:109))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz90141",
    doc="fuzz case, seed 90141",
    inputs=[
        "s[G, T, T]",
        "labels[G]: int64",
    ],
    definitions=[
        "hid[d, n1] = where(d <= n1, maximum(1.5, T) - s[d, n1, labels[d]], -inf)",
        "Wq[n1] = Max(hid[d, n1], d)",
        "v[d, n1] = exp(Wq[n1] + hid[d, n1])",
        "a1[d, aa, bb] = maximum(s[aa, bb, d], v[aa, bb])",
    ],
)

SEED = 90141
