"""fuzz case, seed 15148 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 15148) on 08b0014, shrunk from 3 definition(s).
# Failed: WRONG (memory: widest 48,000 entries against autograd's 4,800 at doubled sizes (+1.00
# degree))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz15148",
    doc="fuzz case, seed 15148 (--windows)",
    inputs=[
        "Zz[Q, V, Q]",
        "Wq[T, K, A, M]",
    ],
    definitions=[
        "gain = view(Zz, Q, T, A, Q)",
        "b2[i, h, q, c] = Sum(Wq[h, q, l, d]*gain[i, h, l, 3*c + d], l, d)",
    ],
    params={"grp": 3, "off": 1},
    sizes={"T": "grp", "A": "V / grp", "M": "off", "B": "(Q - (off)) // 3 + 1"},
    ranges={"c": "B"},
)

SEED = 15148
