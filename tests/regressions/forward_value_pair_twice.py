"""probe case: a read met twice in a contraction with a pair summed elsewhere"""

# Found probing (thirty-second session) on 9603b34: `_pair_computed` took a pair of a sum's
# tensors apart by value, so a read met twice (a[n, d] outside a nested sum and inside it) was
# dropped twice: the forward computed `h @ c` for the second term, a factor a[n, d] missing.
# Failed: WRONG (forward value: out off by 22 (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="probe_pair_twice",
    doc="probe case: a read met twice in a contraction with a pair summed elsewhere",
    inputs=["a[N, D]", "b[D, F]", "c[F, M]"],
    definitions=[
        "h[n, f] = Sum(a[n, d] * b[d, f], d)",
        "out[n, m] = Sum(h[n, f] * c[f, m], f)"
        " + Sum(a[n, d] * Sum(a[n, d] * b[d, f] * c[f, m], f), d)",
    ],
)

SEED = 0
