"""fuzz case, seed 2287 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 2287) on 2a04db1: SKIPPED, not judged.
# Skipped: reference: InterpretError: size J = floor((1 - V)/dil) + 1 is -6, not a positive
# integer (the first draw's sizes were all distinct, 2 and up: J > 0 needs V = 1).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz2287",
    doc="fuzz case, seed 2287 (--affine)",
    inputs=[
        "u[V, V]",
    ],
    definitions=[
        "a1[q, a] = Sum(u[a, q] * u[a, q + 2*t - 1], t)",
        "Wq[y, i] = Sum(a1[dil*y + 2*r, i], r) / V",
    ],
    params={"dil": 1},
    sizes={"J": "(V - 2*(V - 1) - 1) // dil + 1"},
    ranges={"r": "V", "t": "V", "y": "J"},
)


SEED = 2287
