"""fuzz case, seed 7400043"""

# Found by `python -m fuzz` (case seed 7400043) on e149b76. Refused: "index 'aa' is declared
# with range M (ranges=...), but it subscripts an axis of size G", on an op that declares no
# ranges. The two sums each bind their own aa, over z's axis M and hid's axis G. A range read
# off the text (for an index SymPy's evaluation drops) took the first sum's M and was checked
# against the second sum's reads as if the user had declared it; it is now used only where
# the expression shows no range.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz7400043",
    doc="fuzz case, seed 7400043",
    inputs=[
        "z[V, M, U]",
        "hid[U, G]",
        "labels[M, M]: int64",
        "idx[M, M]: int64",
    ],
    definitions=[
        "b2[p] = Sum(cos(z[labels[p, aa], aa, k]), k, aa) / Sum(((1/2) + (2)) * exp(hid[idx[b, p], aa]), aa, b)",
    ],
    stepwise=True,
)

SEED = 7400043
