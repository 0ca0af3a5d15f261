"""fuzz case, seed 226"""

# Found by `python -m fuzz` (case seed 226) on d8f7643, shrunk from 2 definition(s).
# Failed: WRONG (exception AxisError: a value over ['Kx_argmax'] cannot take the axes [])
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz226",
    doc="fuzz case, seed 226",
    inputs=[
        "W[F, G]",
        "Y[F]: int64",
        "cls[F]: int64",
    ],
    definitions=[
        "v[j] = W[j, Y[j]]",
        "Kx = Max(v[cls[f]], f)",
    ],
    stepwise=True,
)

SEED = 226
