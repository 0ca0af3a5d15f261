"""fuzz case, seed 4121 (--affine)"""

# Found by `python -m fuzz --affine` (case seed 4121) on a7b388b, shrunk from 1 definition(s).
# Failed: WRONG (memory: widest 1,600 entries against autograd's 800 at doubled sizes (+1.00
# degree))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz4121",
    doc="fuzz case, seed 4121 (--affine)",
    inputs=[
        "emb[M, M, H]",
        "labels[K]: int64",
        "cls[U, K]: int64",
    ],
    definitions=[
        "act[h, i] = Sum(exp(emb[cls[z, h], cls[pad + z, h], t2]), z, t2)",
    ],
    params={"pad": 1, "step": 2, "stride": 1},
    ranges={"i": "U"},
)

SEED = 4121
