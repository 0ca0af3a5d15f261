"""fuzz case, seed 12400516 (--windows --powers --constants --entries --segments), the
constant subscript last"""

# Written by hand beside `python -m fuzz --windows ...` case seed 12400516 (on 183960c): the
# same read with its constant subscript last, where the adjoint is a scatter_add_ along one
# flat index rather than an index_put_ (the index a python number expanded, as there).
# Failed: WRONG (exception AttributeError: 'int' object has no attribute 'expand' (in the
# generated module, line 196))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz12400516_last",
    doc="fuzz case, seed 12400516, the constant subscript last",
    inputs=[
        "b2[N, T]",
        "hid[A, R]",
    ],
    definitions=[
        "v[aa, n] = Sum(b2[m, n] + hid[aa - T + 1, R - 1], m)",
    ],
    ranges={"aa": "T"},
)

SEED = 12400516
