"""fuzz case, seed 4119 (--affine)"""

# Found by `python -m bench.widest --fuzz affine` (case seed 4119) on f4c5047, shrunk to two
# definitions by the widest tensor's growth (+1 degree over autograd's).
# Failed: the backward read Wq at strided positions over (q, q1) and summed over g after the
# read: a (Q, Q, G) gather where Wq summed over g first is a vector of Q.
# Fixed: a read at positions over more axes than its subscripts, summed over the tensor's own
# axes, is summed first and read after (derive/lower/reductions.py, _summed_before_read).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4119",
    doc="fuzz case, seed 4119 (--affine)",
    inputs=[
        "z[Q]",
        "Wq[Q, G]",
    ],
    definitions=[
        "hid[x] = Sum(z[2*d - off + x], d)",
        "v[q] = Sum(Wq[q, n1]*hid[q], n1)",
    ],
    params={"off": 1},
    ranges={"d": "Q", "x": "Q"},
)

SEED = 4119
