"""fuzz case, seed 660282"""

# Found by `python -m fuzz` (case seed 660282) on 7d799f3, shrunk from 6 definition(s).
# Failed: WRONG (timeout: no result within 30 s of CPU)
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz660282",
    doc="fuzz case, seed 660282",
    inputs=[
        "logits[M, M, M]",
        "z[Z, M, 3]",
    ],
    definitions=[
        "tmp[m, t] = Max(relu(logits[t, h, m]) * cosh(logits[t, m, h]), h)",
        "act[mm, c, q] = where(mm <= q, minimum(z[q, mm, 2], tmp[c, mm]), -inf)",
        "Wq[c, q] = Max(act[mm, c, q], mm)",
        "Zz[mm, c, q] = exp(act[mm, c, q] - Wq[c, q])",
        "W[mm, c, q] = Zz[mm, c, q] / Sum(Zz[s, c, q], s)",
    ],
)

SEED = 660282
