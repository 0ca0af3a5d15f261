"""fuzz case, seed 9820 (--windows), reduced by hand"""

# Found by `python -m fuzz --windows` (case seed 9820) on e086b8c; reduced by hand from v[kk, ij] =
# Sum(g[2*kk + k] * w[ij, k] * cos(where(Wq[k] >= 0, w[3*ij - off, ij + stride*k], w[ij, k])), k).
# Refused (second order not derived): the double backward held the product of where()'s two masks,
# where(c[j] >= 0, 0, 1) * where(c[j] >= 0, 1, 0) * ... (j = clamp(d - 1, 0, D - 1)), which is 0 at
# every point; the lowering dropped that term (rightly) and its lost-axis check (Context.verified)
# took d, which only that term carried, for a lost axis: an engine bug raised where there was none.
# The simplifier now calls a product 0 when it is 0 both where a where()'s condition holds and
# where it fails (derive/symbolic/cases.py).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz9820",
    doc="fuzz case, seed 9820 (--windows), reduced by hand",
    inputs=[
        "c[D]",
        "w[K, D]",
    ],
    definitions=[
        "v[i, k] = w[i, k] * cos(where(c[k] >= 0, w[i, k + 1], w[i, k]))",
    ],
)

SEED = 9820
