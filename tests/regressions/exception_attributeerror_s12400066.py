"""fuzz case, seed 12400066 (--windows --powers --constants --entries --segments)"""

# Found by `python -m fuzz --windows --powers --constants --entries --segments` (case seed
# 12400066) on 183960c, shrunk from 3 definition(s).
# Failed: WRONG (exception AttributeError: 'int' object has no attribute 'clamp' (in the generated
# module, line 524))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12400066",
    doc="fuzz case, seed 12400066 (--windows --powers --constants --entries --segments)",
    inputs=[
        "hid[Q, Q, Q]",
        "w[Q, Q, Y]",
        "pos[Q]: int64",
        "tgt[Q]: int64",
        "gain[P, Q, L, Q]",
    ],
    definitions=[
        "act[i, m] = exp(w[2*m, i - 1, pos[m]])*hid[tgt[m - 1], m, i]",
        "x = view(w, Q, P, L, Y)",
        "emb[mm, t2, l, c] = Sum(x[mm, t2, r, ng*c + o] * gain[t2, l, r, o] * (where(act[o, mm] >= 0, act[l, pad*o - off], act[mm, 1]) + erf(act[2*l - 2, ng*o])), r, o)",
    ],
    params={"ng": 3, "off": 2, "pad": 3},
    sizes={"P": "ng", "L": "Q / ng", "M": "(Y + 1 - Q) // ng + 1"},
    ranges={"c": "M", "m": "Q"},
)

SEED = 12400066
