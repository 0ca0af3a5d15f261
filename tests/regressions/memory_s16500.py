"""fuzz case, seed 16500 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 16500) on adbab6e, shrunk from 4 definition(s).
# Failed: WRONG (memory: widest 204,800 entries against autograd's 1,280 at doubled sizes (+3.00
# degree) on adbab6e): a delta's clamp beside its guard in one term of an Add, under sums
# over a1 and v2 (simplify.unclamped_deltas, _held_apart).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz16500",
    doc="fuzz case, seed 16500 (--windows)",
    inputs=[
        "g[V, V, V]",
        "W1[V, A]",
        "Zz[R]",
        "pos[Z]: int64",
        "tgt[Z]: int64",
        "ids[Z]: int64",
    ],
    definitions=[
        "y[aa, j, i, kk] = Sum(W1[2*i + z - 1, A - kk - 1]*W1[z, kk]*g[aa, j, 2*i + z - 1], z)",
        "out[c] = 1/Sum(exp(y[tgt[c], tgt[c], ids[c], -off + q]), q)",
    ],
    params={"off": 2, "pad": 3},
    sizes={"H": "(V + 2*1 - V) // 2 + 1", "Y": "pad*(A - 1) + R"},
    ranges={"i": "H", "q": "Y", "z": "V"},
)

SEED = 16500
