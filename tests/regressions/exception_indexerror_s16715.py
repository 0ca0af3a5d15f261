"""fuzz case, seed 16715 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 16715) on a2b8454, shrunk from 5 definition(s).
# Failed: WRONG (exception IndexError: shape mismatch: indexing tensors could not be broadcast
# together with shapes [3, 1], [3], [4] (in the generated module, line 178))
# Also on adbab6e. dz read b2[r, r2 + 1, r2] with r2 over R on b2's axis of V: a shape mismatch,
# and silently wrong where V is 1 (indexing.sized_apart; tests/unit/test_lowering.py).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz16715",
    doc="fuzz case, seed 16715 (--windows)",
    inputs=[
        "z[R, R, R]",
        "b2[R, R, V]",
        "idx[R]: int64",
    ],
    definitions=[
        "emb[f, kk] = b2[kk, f, f - 1] * z[kk, idx[f + 4], f - 1]",
    ],
)

SEED = 16715
