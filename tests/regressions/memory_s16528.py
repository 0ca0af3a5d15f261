"""fuzz case, seed 16528 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 16528) on a2b8454, shrunk from 1 definition(s).
# Failed: WRONG (memory: widest 100,000 entries against autograd's 10,000 at doubled sizes (+1.00
# degree)): a window's indicator over j3 under a guard free of j3, beside factors free of it
# (simplify._guard_out).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz16528",
    doc="fuzz case, seed 16528 (--windows)",
    inputs=[
        "C[J, J, J]",
        "emb[J, R, J, J]",
    ],
    definitions=[
        "csum[aa, v, h, w] = Sum(softplus(emb[h - 1, w, v, aa])*C[aa, v, 2*h + x], x)",
    ],
    params={"step": 2},
    sizes={"U": "step", "Y": "(J - (step)) // 2 + 1"},
    ranges={"h": "Y", "x": "U"},
)

SEED = 16528
