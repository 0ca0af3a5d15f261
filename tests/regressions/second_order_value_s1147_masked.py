"""fuzz case, seed 1147 (--affine), with its causal -inf mask"""

# Found by `python -m fuzz --affine` (case seed 1147) on e9f8cf7, shrunk from 5 definition(s).
# Failed: WRONG (second order value: d2/dZz off by inf (relative)): dZz reads the softmax's row
# at c = p - 2, under where(0 <= p - 2 <= I - 1, .., 0); at p < 2 that row's every entry is
# masked by the causal -inf, its sum 0 and the quotient 0 / 0: NaN, selected away by the where
# to the first order, multiplied by a 0 adjoint in the second. Fixed by reading the body at
# clamp(p - 2, 0, I - 1) there (derive.functions.clamp); the padded quotient alone is
# second_order_value_s1147.py.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1147",
    doc="fuzz case, seed 1147 (--affine)",
    inputs=[
        "Zz[I]",
        "h[I]",
        "gain[I]",
        "W1[G]",
    ],
    definitions=[
        "res[p] = Zz[p]",
        "a1[c, s] = where(s <= c, ((res[c]**3) + (3 * res[c + 2])) * W1[s], -inf)",
        "y[c] = Max(a1[c, s], s)",
        "logits[c, s] = exp(a1[c, s] - y[c])",
        "v[c, s] = logits[c, s] / Sum(logits[c, o], o)",
    ],
    ranges={"c": "I"},
)

SEED = 1147
