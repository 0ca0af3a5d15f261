"""fuzz case, seed 14390 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 14390) on 830d14b, the same on ba6b0d9.
# Failed: REFUSED (second order not derived: internal error: lowering a sum over j1 of masks
# times a scan lost its free indices m2, p, r)
# Fixed: a body whose every read is shifted or gathered keeps its free indices in the order
# the lowering plans with (derive/lower/value.py, natural_order): the contraction's plan
# listed its output axes from that order alone.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz14390",
    doc="fuzz case, seed 14390 (--windows)",
    inputs=[
        "logits[P, M, P]",
        "Kx[M, J]",
        "Zz",
        "act[M]",
        "X[V, M]: int64",
    ],
    definitions=[
        "conv[b, l, q] = Sum(logits[g, l, q] * act[b - g], g)",
        "y[u, m, t2] = Sum(conv[u, m + dil*f, t2], f)",
        "out[j, kk, n1] = Sum(where(a > n1, y[j, kk, a] * Sum(act[z - 1] - Kx[z, X[v, z]], z, v), 0), a)",
    ],
    params={"dil": 1},
    sizes={"R": "(P - 1) + M", "Y": "M - dil*(J - 1) - 1 + 1"},
    ranges={"b": "R", "f": "J", "m": "Y", "n1": "P"},
)

SEED = 14390
