"""fuzz case, seed 15148 (--windows)"""

# Found by `python -m fuzz --windows --widest` (case seed 15148) on 08b0014 with its strided
# kernel read already a convolution (the correlated-read rule of derive/lower/windows.py), shrunk from 3 definition(s).
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
        "u[K, Q, Q]",
    ],
    definitions=[
        "gain = view(Zz, Q, T, A, Q)",
        "b2[i, h, q, c] = Sum(Wq[h, q, l, d]*gain[i, h, l, 3*c + d]*u[q, i, c - pad], l, d)",
    ],
    params={"grp": 3, "off": 1, "pad": 3},
    sizes={"T": "grp", "A": "V / grp", "M": "off", "B": "(Q - (off)) // 3 + 1"},
    ranges={"c": "B"},
)

SEED = 15148
