"""fuzz case, seed 9820 (--windows), reduced by hand to one axis"""

# second_order_refused_s9820.py on one axis (reduced by hand from fuzz --windows 9820 on e086b8c).
# Wrong (the double backward raised TypeError: addcmul(): argument 'tensor1' must be Tensor, not
# int): the product of where()'s two masks, where(c[j] >= 0, 0, 1) * where(c[j] >= 0, 1, 0) * ...
# (j = clamp(k - 1, 0, K - 1)), which is 0 at every point, was lowered to the number 0, which no
# axis check stops on a scalar, and handed to torch.addcmul as a tensor. The simplifier now calls
# the product 0 (0 where the condition holds and 0 where it fails: derive/symbolic/cases.py).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz9820",
    doc="fuzz case, seed 9820 (--windows), reduced by hand to one axis",
    inputs=[
        "c[K]",
        "w[K]",
    ],
    definitions=[
        "v[k] = cos(where(c[k] >= 0, w[k + 1], w[k]))",
    ],
)

SEED = 9820
