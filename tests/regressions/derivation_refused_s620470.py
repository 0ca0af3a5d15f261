"""fuzz case, seed 620470, reduced by hand"""

# Found by `python -m fuzz` (case seed 620470) on e086b8c; reduced by hand to its Max. Refused:
# "cannot lower Mod(s_argmax, J): a floor or Mod of anything but int data". A Max over every
# index of its body is 0-d, and its argmax a = j*J + u a 0-d int tensor, read (as every 0-d
# tensor) as a real symbol: the digits floor(a/J), Mod(a, J) took it for no int data. The
# lowering now knows the int tensors by name (the second order's argmax input too).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz620470",
    doc="fuzz case, seed 620470, reduced by hand",
    inputs=[
        "hid[A, J]",
    ],
    definitions=[
        "s = Max((sqrt(A) * exp(hid[j, u]))**(-2), j, u)",
    ],
)

SEED = 620470
