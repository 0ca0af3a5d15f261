"""fuzz case, seed 4022 (--affine)"""

# Found by `python -m bench.widest --fuzz affine` (case seed 4022) on f4c5047; one of its four
# definitions. Failed: the double backward's widest tensor had seven axes (78,125 entries at
# sizes 5, 10,000,000 at 10; autograd's 125 and 1,000): deltas of a gathered, strided read
# under a sum over g2, inside a difference of such sums times db_dgain[f2, g1, f3], summed over
# (f2, g1, f3) whole, were equality masks over every axis.
# Fixed: such a difference is summed apart term by term where a term holds the delta under a
# sum (simplify._delta_terms_apart), a sum whole under a sum joins its limits where nothing
# else applies, and a sum of solved deltas among other terms is a scatter of its own
# (lower/lowerer.py, _sum): F x F x G x F now.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4022",
    doc="fuzz case, seed 4022 (--affine)",
    inputs=[
        "gain[F, G, F]",
        "tgt[G, F]: int64",
    ],
    definitions=[
        "act2[j, i] = (2 * gain[tgt[j + 1, i], 2*i + step*j + pad, tgt[j, i + 1]])"
        " / Sum((2) * exp(gain[l, pad*j - step, i]), l)",
    ],
    params={"pad": 1, "step": 1},
)

SEED = 4022
