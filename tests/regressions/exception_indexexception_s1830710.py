"""fuzz case, seed 1830710 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 1830710) on 03bcfa0: SymPy's IndexException,
# "Indexed needs at least one index" (lower/reductions.py). A windowed read's other factors
# were a number (log(1/2)), and the lowering made a stand-in tensor of them over no axes.
# Fixed: _window_among stands in only for factors with an index.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1830710",
    doc="fuzz case, seed 1830710 (--affine)",
    inputs=["w[I]"],
    definitions=["out[kk] = Sum(w[alpha*kk + b - alpha] * log(1/2), b)"],
    params={"alpha": 3},
    sizes={"N": "(I + alpha - I) // alpha + 1"},
    ranges={"b": "I", "kk": "N"},
)

SEED = 1830710
