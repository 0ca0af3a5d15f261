"""fuzz case, seed 4011 (--affine)"""

# Found by `python -m bench.widest --fuzz affine` (case seed 4011) on f4c5047, shrunk to one
# definition by the widest tensor's growth (+2 degrees over autograd's); the shifted read has
# 0.5 added here (h[k] against h[p - k] ties itself at p = 2k: every draw was skipped as
# ill-conditioned, and the value check could not judge it).
# Failed: the backward of a maximum with a shifted read, its adjoint's delta(b, b1 - b3*off)
# under a sum over b3 in one term of a sum over b1, was a mask in a (B, B, B, B) product.
# Fixed: a term holding under a sum a delta that delta_invert solves for the summed index is
# summed apart (simplify._holds_delta_over), then solved.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4011",
    doc="fuzz case, seed 4011 (--affine)",
    inputs=[
        "h[B]",
        "v[B, B]",
    ],
    definitions=[
        "W[p, aa] = Sum(v[k, aa]*maximum(h[k], h[-k*off + p] + 0.5), k)",
    ],
    params={"off": 1},
    ranges={"p": "B"},
)

SEED = 4011
