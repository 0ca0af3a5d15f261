"""fuzz case, seed 15002 (--windows)"""

# Found by `python -m bench.widest --fuzz windows` (case seed 15002) on f4c5047, shrunk to one
# definition by the widest tensor's growth (+1 degree over autograd's: B^4 against B^3).
# Failed: the first backward's two deltas against data, delta(b, tgt[..]) delta(b1, tgt[..]),
# were equality masks over (b, b1, b2, b3); the second order's delta over b, one sum deep,
# was not solved (only affine ones were, by delta_invert).
# Fixed: deltas against data together are one scatter (derive/lower/assign.py,
# solved_scatter); a delta(t, e) under nested sums is solved where it stands
# (derive/symbolic/inversion.py, delta_through_sum with the simplifier's _delta_eliminate).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz15002",
    doc="fuzz case, seed 15002 (--windows)",
    inputs=[
        "Wq[B, B, B]",
        "tgt[B, B]: int64",
    ],
    definitions=[
        "s = Sum(Sum(Wq[tgt[-o + 1, o], tgt[q, o], -o - pad*q + B - 1], o), q)",
    ],
    params={"pad": 2},
)

SEED = 15002
