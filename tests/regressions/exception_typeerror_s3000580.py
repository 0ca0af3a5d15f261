"""fuzz case, seed 3000580"""

# Found by `python -m fuzz` (case seed 3000580) on 0d2811e, shrunk from 4 definition(s).
# Failed: WRONG (exception TypeError: expected Tensor as element 2 in argument 0, but got int (in
# the generated module, line 183))
# An entry counted from the end (I - 1) beside a pick by int data, in a product with a sum
# whose own pick may fall outside the axis: the adjoint is a solved scatter through
# index_put_, its position in that axis the python number I - 1, which index_put_ takes only
# as a tensor (now a 0-d one).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz3000580",
    doc="fuzz case, seed 3000580",
    inputs=[
        "Kx[I, I, I]",
        "emb[I, I, I]",
        "labels[I]: int64",
    ],
    definitions=[
        "out[w] = Kx[labels[w], w, I - 1]*Sum(emb[labels[d], w, d], d)",
    ],
)

SEED = 3000580
